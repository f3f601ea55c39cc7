package simulate

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestGolden runs Main on each case of testdata/*.args and compares stdout,
// stderr and the exit code with testdata/NAME.golden. Regenerate with
// go test ./simulate -run TestGolden -update.
func TestGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/*.args")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 8 {
		t.Fatalf("found %d golden cases, want at least 8", len(files))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".args")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Fields(string(raw))
			lookup := func(k string) (string, bool) {
				v, ok := map[string]string{"EXACT_LIMIT": "4"}[k]
				return v, ok
			}
			var stdout, stderr bytes.Buffer
			code := MainEnv(args, &stdout, &stderr, lookup)
			got := "$ sluice simulate " + strings.Join(args, " ") + "\n" +
				"exit " + itoa(int64(code)) + "\n" +
				"-- stdout --\n" + stdout.String() + "-- stderr --\n" + stderr.String()
			golden := strings.TrimSuffix(f, ".args") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("sluice simulate %s: output differs from %s (-want +got):\n%s", strings.Join(args, " "), golden, diff)
			}
		})
	}
}

func TestMainExitCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		args []string
		want int
		msg  string
	}{
		{"no policy", []string{}, ExitUsage, "no policy"},
		{"two ways", []string{"--compare", "--policy", "gcra:burst=1,rate=1"}, ExitUsage, "one way only"},
		{"unknown flag", []string{"--frobnicate"}, ExitUsage, "frobnicate"},
		{"stray argument", []string{"--compare", "extra"}, ExitUsage, `unexpected argument "extra"`},
		{"help", []string{"-h"}, ExitOK, ""},
		{"bad policy", []string{"--policy", "token_bucket:capacity=0,rate=1"}, ExitUsage, "capacity must be at least 1"},
		{"bad field", []string{"--policy", "token_bucket:size=3"}, ExitUsage, `unknown field "size"`},
		{"bad pattern", []string{"--compare", "--pattern", "zigzag"}, ExitUsage, `unknown pattern "zigzag"`},
		{"trace without file", []string{"--compare", "--pattern", "trace"}, ExitUsage, "--trace FILE"},
		{"missing trace", []string{"--compare", "--pattern", "trace", "--trace", "testdata/nope.csv"}, ExitError, "nope.csv"},
		{"cost above limit", []string{"--compare", "--limit", "2", "--cost", "3"}, ExitError, "cost 3 outside 1..2"},
		{"unknown config policy", []string{"--config", "testdata/sluice.yaml", "--policy", "nope"}, ExitError, `no policy "nope" (defined: per-user, shaped, exact)`},
		{"zero duration", []string{"--compare", "--duration", "0s"}, ExitUsage, "--duration must be positive, got 0s"},
		{"zero step", []string{"--compare", "--step", "0s"}, ExitUsage, "--step must be positive"},
		{"zero cost", []string{"--compare", "--cost", "0"}, ExitUsage, "--cost must be positive, got 0"},
		{"zero limit", []string{"--compare", "--limit", "0"}, ExitUsage, "--limit must be positive"},
		{"too many requests", []string{"--compare", "--duration", "10000h"}, ExitUsage, "is 360000000 requests, more than the 20000000"},
		{"field twice", []string{"--policy", "token_bucket:capacity=10,rate=1,capacity=20"}, ExitUsage, "capacity given twice"},
		{"ok", []string{"--compare", "--duration", "1s"}, ExitOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			if got := Main(tt.args, &stdout, &stderr); got != tt.want {
				t.Fatalf("Main(%q) = %d, want %d; stderr:\n%s", tt.args, got, tt.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.msg) {
				t.Errorf("Main(%q) stderr = %q, want it to mention %q", tt.args, stderr.String(), tt.msg)
			}
			if tt.want == ExitOK && stdout.Len() == 0 {
				t.Errorf("Main(%q) wrote nothing to stdout", tt.args)
			}
		})
	}
}

// TestSeed: the same seed gives the same output byte for byte, another seed
// other traffic.
func TestSeed(t *testing.T) {
	t.Parallel()
	run := func(seed string) string {
		var out, errb bytes.Buffer
		args := []string{"--compare", "--pattern", "poisson", "--rps", "15", "--duration", "20s", "--seed", seed, "--svg", filepath.Join(t.TempDir(), "c.svg")}
		if code := Main(args, &out, &errb); code != ExitOK {
			t.Fatalf("Main(%q) = %d: %s", args, code, errb.String())
		}
		svg, err := os.ReadFile(args[len(args)-1])
		if err != nil {
			t.Fatal(err)
		}
		return out.String() + string(svg)
	}
	a, b, c := run("42"), run("42"), run("43")
	if a != b {
		t.Errorf("two runs with --seed 42 differ")
	}
	if a == c {
		t.Errorf("runs with --seed 42 and --seed 43 are identical")
	}
}

// TestBoundaryDefaultStep is issue 12 item 20: without --step, the boundary
// pattern's timeline steps by W/10 (or --spread), so the two bursts on each
// side of the boundary show in rows of their own.
func TestBoundaryDefaultStep(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		rows []string
	}{
		{[]string{"--algorithm", "fixed_window", "--limit", "10", "--window", "1s", "--pattern", "boundary"}, []string{"\n900ms ", "\n1s ", "\n1.1s "}},
		{[]string{"--algorithm", "fixed_window", "--limit", "10", "--window", "1m", "--pattern", "boundary", "--spread", "1s"}, []string{"\n59s ", "\n1m0s ", "\n1m1s "}},
	} {
		var stdout, stderr bytes.Buffer
		if code := Main(tt.args, &stdout, &stderr); code != ExitOK {
			t.Fatalf("Main(%q) = %d: %s", tt.args, code, stderr.String())
		}
		for _, row := range tt.rows {
			if !strings.Contains(stdout.String(), row) {
				t.Errorf("Main(%q): no timeline row %q:\n%s", tt.args, strings.TrimSpace(row), stdout.String())
			}
		}
	}
}
