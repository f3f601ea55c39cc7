package main

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// TestQuickRun runs the harness's -quick mode end to end against the
// redis-server it starts, so the harness cannot rot: every implementation
// must make decisions without errors and the ceiling must be measured.
func TestQuickRun(t *testing.T) {
	redistest.Require(t)
	sluicetest.RequireProgram(t, "redis-tools", "redis-benchmark")
	out := filepath.Join(t.TempDir(), "report.md")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	if code := run(ctx, []string{"-quick", "-out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("run(-quick) = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	if report != stdout.String() {
		t.Errorf("-out file differs from stdout")
	}
	rows := tableRows(report, "impl")
	for _, im := range impls {
		row, ok := rows[im.name+"/16"]
		if !ok {
			t.Errorf("report has no row for %s at concurrency 16", im.name)
			continue
		}
		if n, err := strconv.Atoi(row["decisions/s"]); err != nil || n == 0 {
			t.Errorf("%s: decisions/s = %q, want a positive integer", im.name, row["decisions/s"])
		}
		if row["errors"] != "0" {
			t.Errorf("%s: %s errors", im.name, row["errors"])
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
	m := regexp.MustCompile(`Ceiling: .* → \*\*(\d+) decisions/s\*\*`).FindStringSubmatch(report)
	if m == nil {
		t.Fatalf("report has no ceiling:\n%s", report)
	}
	if n, _ := strconv.Atoi(m[1]); n == 0 {
		t.Errorf("ceiling: 0 decisions/s")
	}
	for _, want := range []string{"sluice / redis_rate", "EVALSHA "} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q", want)
		}
	}
}

// tableRows returns the rows of every Markdown table whose first header
// cell is first, keyed by "<first cell>/<second cell>", each a map from
// header to cell.
func tableRows(md, first string) map[string]map[string]string {
	rows := map[string]map[string]string{}
	var head []string
	for line := range strings.SplitSeq(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			head = nil
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case head == nil && cells[0] == first:
			head = cells
		case head == nil || strings.HasPrefix(cells[0], "---"):
		case len(cells) == len(head) && len(cells) > 1:
			row := map[string]string{}
			for i, h := range head {
				row[h] = cells[i]
			}
			rows[cells[0]+"/"+cells[1]] = row
		}
	}
	return rows
}

func TestHistogram(t *testing.T) {
	t.Run("bucket bounds", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for range 100_000 {
			v := rng.Int64N(histMax + 1)
			lo, hi := bucketRange(bucketOf(v))
			if v < lo || v > hi {
				t.Fatalf("bucketOf(%d) covers [%d, %d]", v, lo, hi)
			}
			if v >= linearTop && float64(hi-lo+1)/float64(lo) > 1.0/subCount {
				t.Fatalf("bucket of %d is [%d, %d], wider than 1/%d", v, lo, hi, subCount)
			}
		}
		if got := bucketOf(histMax); got != histLength-1 {
			t.Errorf("bucketOf(histMax) = %d, want %d", got, histLength-1)
		}
	})
	t.Run("quantiles", func(t *testing.T) {
		var h histogram
		for i := 1; i <= 10_000; i++ {
			h.record(time.Duration(i) * time.Microsecond)
		}
		for _, tc := range []struct {
			q    float64
			want time.Duration
		}{{0.5, 5 * time.Millisecond}, {0.99, 9900 * time.Microsecond}, {1, 10 * time.Millisecond}} {
			got := h.quantile(tc.q)
			if diff := float64(got-tc.want) / float64(tc.want); diff < -1.0/subCount || diff > 1.0/subCount {
				t.Errorf("quantile(%v) = %v, want %v ±1/%d", tc.q, got, tc.want, subCount)
			}
		}
	})
	t.Run("merge and empty", func(t *testing.T) {
		var a, b histogram
		if got := a.quantile(0.5); got != 0 {
			t.Errorf("empty quantile(0.5) = %v, want 0", got)
		}
		a.record(100)
		b.record(100)
		b.record(5)
		a.merge(&b)
		if a.total != 3 || a.quantile(0.01) != 5 || a.quantile(0.99) != 100 {
			t.Errorf("merged: total %d, q0.01 %v, q0.99 %v; want 3, 5ns, 100ns", a.total, a.quantile(0.01), a.quantile(0.99))
		}
	})
}

func TestParseMonitorLine(t *testing.T) {
	tests := []struct {
		line string
		src  string
		argv []string
	}{
		{`1700000000.123456 [0 127.0.0.1:5000] "evalsha" "ABCDEF" "1" "p:{tag}" "" "1e5"`, "127.0.0.1:5000", []string{"evalsha", "ABCDEF", "1", "p:{tag}", "", "1e5"}},
		{`1700000000.1 [0 lua] "GET" "a b"`, "lua", []string{"GET", "a b"}},
		{`1.2 [3 unix:/tmp/r.sock] "EVAL" "return \"x\"\n\x41\\" "0"`, "unix:/tmp/r.sock", []string{"EVAL", "return \"x\"\nA\\", "0"}},
	}
	for _, tc := range tests {
		src, argv, err := parseMonitorLine(tc.line)
		if err != nil || src != tc.src || !cmp.Equal(argv, tc.argv) {
			t.Errorf("parseMonitorLine(%q) = %q, %q, %v; want %q, %q, nil", tc.line, src, argv, err, tc.src, tc.argv)
		}
	}
	for _, bad := range []string{`no bracket`, `1 [0] "GET"`, `1 [0 x] GET`, `1 [0 x] "unterminated`, `1 [0 x] "\x4"`} {
		if _, _, err := parseMonitorLine(bad); err == nil {
			t.Errorf("parseMonitorLine(%q): no error", bad)
		}
	}
}

func TestScriptCallFrom(t *testing.T) {
	const marker = "TAG"
	src := "return 1"
	sha := "e0e1f9fabfc9d4800c877a703b823ac0578ff8db" // sha1("return 1"), as SCRIPT LOAD reports it
	want := &scriptCall{sha: sha, source: src, marker: marker, keys: []string{"p:{TAG}:a", "p:{TAG}:b"}, args: []string{"e", "", "1"}}
	tests := []struct {
		name string
		argv []string
		want *scriptCall
	}{
		{"eval", []string{"EVAL", src, "2", "p:{TAG}:a", "p:{TAG}:b", "e", "", "1"}, want},
		{"evalsha after script load", []string{"evalsha", strings.ToUpper(sha), "2", "p:{TAG}:a", "p:{TAG}:b", "e", "", "1"}, want},
		{"evalsha of unknown script", []string{"EVALSHA", "ab", "1", "p:{TAG}"}, nil},
		{"other key", []string{"EVAL", src, "1", "p:{x}", "TAG"}, nil},
		{"other command", []string{"GET", "p:{TAG}"}, nil},
		{"empty", nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			loaded := map[string]string{}
			if _, err := scriptCallFrom([]string{"SCRIPT", "LOAD", src}, marker, loaded); err != nil {
				t.Fatal(err)
			}
			got, err := scriptCallFrom(tc.argv, marker, loaded)
			if err != nil {
				t.Fatalf("scriptCallFrom(%q): %v", tc.argv, err)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(scriptCall{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("scriptCallFrom(%q) mismatch (-want +got):\n%s", tc.argv, diff)
			}
		})
	}
	for _, bad := range [][]string{{"EVAL", src, "x"}, {"EVAL", src, "3", "TAG"}, {"EVAL", src, "-1"}} {
		if _, err := scriptCallFrom(bad, marker, map[string]string{}); err == nil {
			t.Errorf("scriptCallFrom(%q): no error", bad)
		}
	}
	if got := want.withKey("k7"); !cmp.Equal(got, []string{"p:{k7}:a", "p:{k7}:b"}) {
		t.Errorf("withKey(k7) = %q", got)
	}
}

func TestParseBenchmarkCSV(t *testing.T) {
	out := `"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"EVALSHA ab 1 k:__rand_int__","327868.84","2.259","0.384","2.199","3.535","6.591","6.719"
`
	rps, p50, p99, err := parseBenchmarkCSV([]byte(out))
	if err != nil || rps != 327868.84 || p50 != 2199*time.Microsecond || p99 != 6591*time.Microsecond {
		t.Errorf("parseBenchmarkCSV = %v, %v, %v, %v; want 327868.84, 2.199ms, 6.591ms, nil", rps, p50, p99, err)
	}
	if _, _, _, err := parseBenchmarkCSV([]byte(`"test","rps"` + "\n")); err == nil {
		t.Errorf("parseBenchmarkCSV without a data row: no error")
	}
}

func TestParseFlags(t *testing.T) {
	for _, args := range [][]string{{"-impl", "nope"}, {"-conc", "0"}, {"-keys", "x"}, {"-duration", "0s"}, {"extra"}} {
		if _, err := parseFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		}
	}
	c, err := parseFlags(nil, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c.conc, []int{1, 16, 64, 256}) || !cmp.Equal(c.keys, []int{1000, 100000}) || len(c.impls) != len(impls) || c.duration != 3*time.Second {
		t.Errorf("defaults: conc %v keys %v impls %d duration %v", c.conc, c.keys, len(c.impls), c.duration)
	}
}

// TestTargets: the verdicts follow the figures, and the ceiling's ratio is
// judged only when redis-server was busy during it (not starved).
func TestTargets(t *testing.T) {
	cell := func(impl string, conc int, perSec float64) cellResult {
		return cellResult{impl: impl, keys: 10, conc: conc, decisions: uint64(perSec), elapsed: time.Second}
	}
	r := &report{cfg: &config{conc: []int{1, 64, 256}}, cells: []cellResult{
		cell(sluiceName, 1, 1000), cell(redisRateName, 1, 900),
		cell(sluiceName, 64, 30000), cell(redisRateName, 64, 10000),
		cell(sluiceName, 256, 40000), cell(redisRateName, 256, 20000),
	}}
	for _, tc := range []struct {
		name string
		ceil ceilingResult
		want []string
	}{
		{"busy", ceilingResult{rps: 25000, serverCPUPer: 38 * time.Microsecond}, []string{
			"at concurrency 1: **met** (1.11×)",
			"at concurrency ≥ 64: **missed** (3.00× at 64, 2.00× at 256)",
			"the ceiling: **met** (1.60×)",
		}},
		{"starved", ceilingResult{rps: 25000, serverCPUPer: 10 * time.Microsecond}, []string{"the ceiling: **not shown: the ceiling was starved** (1.60×)"}},
		{"unknown CPU", ceilingResult{rps: 25000}, []string{"**not shown: the ceiling was starved**"}},
		{"below", ceilingResult{rps: 30000, serverCPUPer: 33 * time.Microsecond}, []string{"the ceiling: **missed** (1.33×)"}},
	} {
		var b strings.Builder
		r.targets(&b, 10, tc.ceil, true)
		for _, w := range tc.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: targets %q, want it to contain %q", tc.name, b.String(), w)
			}
		}
	}
}
