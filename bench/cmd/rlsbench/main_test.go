package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	sluiceconfig "github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/internal/redistest"
)

// TestConfigs loads the generated sluice configuration with sluice's own
// loader: it must be valid, serve the rate limit service on the given
// address with the given Redis, and read the envoyproxy/ratelimit file
// with the user and check limits.
func TestConfigs(t *testing.T) {
	dir := t.TempDir()
	path, err := writeConfigs(dir, 7, "127.0.0.1:18081", "127.0.0.1:16379")
	if err != nil {
		t.Fatal(err)
	}
	c, err := sluiceconfig.Load(path, func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatalf("sluice rejects the generated configuration: %v", err)
	}
	if c.RLS == nil || c.RLS.Listen != "127.0.0.1:18081" {
		t.Fatalf("rls section = %+v, want one listening on 127.0.0.1:18081", c.RLS)
	}
	if got := c.Store.Redis.Addrs; len(got) != 1 || got[0] != "127.0.0.1:16379" {
		t.Errorf("redis addrs = %v", got)
	}
	doms := c.RLS.AllDomains()
	if len(doms) != 1 || doms[0].Domain != domain || !strings.HasSuffix(doms[0].File, filepath.FromSlash(envoyFile)) {
		t.Fatalf("domains = %+v, want %q read from %s", doms, domain, envoyFile)
	}
	limits := map[string]int64{}
	for _, d := range doms[0].Descriptors {
		if d.RateLimit == nil || d.RateLimit.Unit != "minute" {
			t.Fatalf("descriptor %q: rate_limit %+v, want a per-minute limit", d.Key, d.RateLimit)
		}
		limits[d.Key] = d.RateLimit.RequestsPerUnit
	}
	if limits[userKey] != userLimit || limits[checkKey] != 7 || len(limits) != 2 {
		t.Errorf("limits = %v, want %s=%d and %s=7", limits, userKey, userLimit, checkKey)
	}
	env := strings.Join(ratelimitEnv(dir, "127.0.0.1:16379", 1, 2, 3), "\n")
	for _, want := range []string{"REDIS_URL=127.0.0.1:16379", "GRPC_PORT=1\n", "RUNTIME_ROOT=" + dir + "\n", "RUNTIME_SUBDIRECTORY=" + runtimeSubdir, "RUNTIME_WATCH_ROOT=false", "GRPC_HOST=127.0.0.1"} {
		if !strings.Contains(env+"\n", want) {
			t.Errorf("envoyproxy/ratelimit's environment lacks %q:\n%s", want, env)
		}
	}
}

func TestSummarizeAndQuantile(t *testing.T) {
	if s := summarize([]float64{3, 1, 2}); s != (summary{2, 1, 3}) {
		t.Errorf("summarize(3,1,2) = %+v", s)
	}
	if s := summarize([]float64{4, 1, 2, 3}); s != (summary{2.5, 1, 4}) {
		t.Errorf("summarize(4,1,2,3) = %+v", s)
	}
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i))
	}
	if q50, q99 := quantile(lat, 0.5), quantile(lat, 0.99); q50 != 50 || q99 != 99 {
		t.Errorf("quantiles of 1..100 = %v, %v; want 50, 99", q50, q99)
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}

// TestQuickRun runs the harness's -quick mode end to end on sluice, and on
// envoyproxy/ratelimit too when RLSBENCH_RATELIMIT_BIN names its binary:
// each server must pass the correctness check and make decisions without
// errors.
func TestQuickRun(t *testing.T) {
	redistest.Require(t)
	args := []string{"-quick"}
	servers := []string{"sluice"}
	if bin := os.Getenv("RLSBENCH_RATELIMIT_BIN"); bin != "" {
		if _, err := os.Stat(bin); err != nil {
			t.Fatalf("RLSBENCH_RATELIMIT_BIN: %v", err)
		}
		args = append(args, "-ratelimit-bin", bin)
		servers = append(servers, "envoyproxy/ratelimit")
	} else {
		t.Log("RLSBENCH_RATELIMIT_BIN is not set: measuring sluice only (envoyproxy/ratelimit is not installed in CI)")
	}
	out := filepath.Join(t.TempDir(), "report.md")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	if code := run(ctx, append(args, "-out", out), &stdout, &stderr); code != 0 {
		t.Fatalf("run(%v) = %d, want 0; stderr:\n%s\nreport:\n%s", args, code, stderr.String(), stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	if report != stdout.String() {
		t.Errorf("-out file differs from stdout")
	}
	checks := benchproc.TableRows(report)
	_, load, _ := strings.Cut(report, "## Throughput")
	cells := benchproc.TableRows(load)
	for _, s := range servers {
		if v := checks[s]["verdict"]; v != "exact" {
			t.Errorf("%s: correctness verdict %q, want exact", s, v)
		}
		if n, err := strconv.Atoi(cells[s]["decisions/s"]); err != nil || n <= 0 {
			t.Errorf("%s: decisions/s = %q, want a positive integer", s, cells[s]["decisions/s"])
		}
		if cells[s]["errors"] != "0" || cells[s]["over limit"] != "0" {
			t.Errorf("%s: %s errors, %s over limit; want none", s, cells[s]["errors"], cells[s]["over limit"])
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s", report)
	}
}

// TestParseFlags: the load is bounded (duration, rounds, concurrency) and
// bad values are refused with the flag's name.
func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{"-conc", "1,16", "-repeat", "3", "-duration", "2s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.conc) != 2 || c.conc[1] != 16 || c.repeat != 3 || c.duration != 2*time.Second || c.ratelimitBin != "" {
		t.Errorf("parsed %+v", c)
	}
	for _, args := range [][]string{
		{"-conc", "0"}, {"-conc", "1,x"}, {"-conc", "2000"}, {"-duration", "0s"}, {"-duration", "6m"},
		{"-repeat", "0"}, {"-repeat", "21"}, {"-keys", "0"}, {"-check-limit", "0"}, {"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
}
