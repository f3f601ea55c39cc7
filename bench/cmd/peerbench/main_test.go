package main

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// TestMain lets the test binary serve as the upstream and fasthttp children
// that run starts.
func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	os.Exit(m.Run())
}

// TestQuickRun runs every cell but Traefik's once for a second at low
// concurrency and checks that the report has a row per cell with requests
// per second and CPU per request above zero, no errors, and the ratios to
// nginx. The Redis cell is left out when redis-server is missing, unless
// CI=true.
func TestQuickRun(t *testing.T) {
	sluicetest.RequireProgram(t, "nginx-light", "nginx")
	sluicetest.RequireProgram(t, "wrk", "wrk")
	names := []string{"upstream", "nginx", "fasthttp", "sluice-nolimits", "sluice-memory", "sluice-redis"}
	if err := redistest.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis-server under CI=true: %v", err)
		}
		t.Logf("leaving out the sluice-redis cell: %v", err)
		names = names[:len(names)-1]
	}
	out := filepath.Join(t.TempDir(), "report.md")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	args := []string{"-t", "1", "-c", "4", "-d", "1s", "-warmup", "0", "-rounds", "1", "-users", "1000",
		"-cells", strings.Join(names, ","), "-out", out}
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	if report != stdout.String() {
		t.Errorf("-out file differs from stdout")
	}
	rows := benchproc.TableRows(report)
	if len(rows) != len(names) {
		t.Errorf("report has %d rows, want %d", len(rows), len(names))
	}
	for _, name := range names {
		row, ok := rows[name]
		if !ok {
			t.Errorf("report has no row for cell %s", name)
			continue
		}
		for _, col := range []string{"req/s", "CPU µs/req"} {
			if v, err := strconv.ParseFloat(row[col], 64); err != nil || v <= 0 {
				t.Errorf("%s: %s = %q, want a positive number", name, col, row[col])
			}
		}
		if row["errors"] != "0" {
			t.Errorf("%s: errors = %q, want 0", name, row["errors"])
		}
		want := "1.00×"
		if name != "nginx" {
			want = "×"
		}
		for _, col := range []string{"req/s ÷ nginx", "CPU ÷ nginx"} {
			if !strings.HasSuffix(row[col], want) {
				t.Errorf("%s: %s = %q, want a ratio ending in %q", name, col, row[col], want)
			}
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", report, stderr.String())
	}
}

// TestNginxConfigValid checks the generated nginx.conf with `nginx -t`.
func TestNginxConfigValid(t *testing.T) {
	bin := sluicetest.RequireProgram(t, "nginx-light", "nginx")
	dir := filepath.Join(t.TempDir(), "nginx")
	path, err := writeNginxConfig(dir, 1, 2, "127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	if err := checkNginxConfig(bin, path); err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"worker_processes 2;", "limit_req_zone $http_x_user_id zone=peruser:32m", "limit_req zone=peruser", "listen 127.0.0.1:1;", "server 127.0.0.1:2;"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nginx.conf has no %q:\n%s", want, conf)
		}
	}
}

// TestTraefikConfig parses both Traefik configs and checks the router, the
// rateLimit keyed on X-User-Id and the Redis store only in the Redis variant.
func TestTraefikConfig(t *testing.T) {
	var static struct {
		EntryPoints map[string]struct{ Address string } `yaml:"entryPoints"`
		Providers   struct {
			File struct{ Filename string } `yaml:"file"`
		} `yaml:"providers"`
	}
	if err := yaml.Unmarshal([]byte(traefikStatic(1234, "/x/dynamic.yaml")), &static); err != nil {
		t.Fatal(err)
	}
	if static.EntryPoints["web"].Address != "127.0.0.1:1234" || static.Providers.File.Filename != "/x/dynamic.yaml" {
		t.Errorf("static config: entry point %q, file %q", static.EntryPoints["web"].Address, static.Providers.File.Filename)
	}
	for _, redisAddr := range []string{"", "127.0.0.1:7000"} {
		var dyn struct {
			HTTP struct {
				Routers map[string]struct {
					Rule        string
					Service     string
					Middlewares []string
				} `yaml:"routers"`
				Middlewares map[string]struct {
					RateLimit struct {
						Average, Burst  int64
						SourceCriterion struct {
							RequestHeaderName string `yaml:"requestHeaderName"`
						} `yaml:"sourceCriterion"`
						Redis *struct{ Endpoints []string } `yaml:"redis"`
					} `yaml:"rateLimit"`
				} `yaml:"middlewares"`
				Services map[string]struct {
					LoadBalancer struct {
						Servers []struct{ URL string } `yaml:"servers"`
					} `yaml:"loadBalancer"`
				} `yaml:"services"`
			} `yaml:"http"`
		}
		text := traefikDynamic("127.0.0.1:9", redisAddr)
		if err := yaml.Unmarshal([]byte(text), &dyn); err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		r := dyn.HTTP.Routers["api"]
		rl := dyn.HTTP.Middlewares["limit"].RateLimit
		servers := dyn.HTTP.Services[r.Service].LoadBalancer.Servers
		switch {
		case r.Rule != "PathPrefix(`/`)" || len(r.Middlewares) != 1 || r.Middlewares[0] != "limit":
			t.Errorf("router: %+v", r)
		case rl.SourceCriterion.RequestHeaderName != "X-User-Id" || rl.Average < 1e9 || rl.Burst < 1e9:
			t.Errorf("rateLimit: %+v", rl)
		case len(servers) != 1 || servers[0].URL != "http://127.0.0.1:9":
			t.Errorf("service servers: %+v", servers)
		case redisAddr == "" && rl.Redis != nil:
			t.Errorf("memory variant has a redis store: %+v", rl.Redis)
		case redisAddr != "" && (rl.Redis == nil || len(rl.Redis.Endpoints) != 1 || rl.Redis.Endpoints[0] != redisAddr):
			t.Errorf("redis variant: store %+v, want endpoints [%s]", rl.Redis, redisAddr)
		}
	}
}

// TestTraefikVersion runs stand-in binaries that print what `traefik
// version` prints and checks the version and the Redis support read from it.
func TestTraefikVersion(t *testing.T) {
	sluicetest.RequireProgram(t, "a POSIX shell", "sh")
	for _, tc := range []struct {
		version string
		redis   bool
	}{{"3.6.1", true}, {"3.4.0", true}, {"v3.3.7", false}, {"2.11.2", false}, {"4.0.0", true}} {
		bin := filepath.Join(t.TempDir(), "traefik")
		script := "#!/bin/sh\nprintf 'Version:      " + tc.version + "\\nCodename:     x\\nGo version:   go1.24\\n'\n"
		if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		v, redis, err := traefikVersion(bin)
		if err != nil || v != tc.version || redis != tc.redis {
			t.Errorf("traefikVersion(%s) = %q, %v, %v; want %q, %v, nil", tc.version, v, redis, err, tc.version, tc.redis)
		}
	}
}

func TestParseWrk(t *testing.T) {
	out := "Running 1s test @ http://x\n  1 threads and 4 connections\npeerbench-wrk requests=5000 duration_us=1000000 connect=1 read=2 write=3 status=4 timeout=5\n"
	r, err := parseWrk(out)
	if err != nil {
		t.Fatal(err)
	}
	if r.requests != 5000 || r.duration != time.Second || r.errors != 15 || r.rps() != 5000 {
		t.Errorf("parseWrk = %+v (rps %v), want 5000 requests in 1s, 15 errors", r, r.rps())
	}
	if _, err := parseWrk("Running 1s test\n"); err == nil {
		t.Error("parseWrk accepted output without the result line")
	}
}

func TestStats(t *testing.T) {
	runs := func(rps ...int64) []cellRun {
		var rs []cellRun
		for _, n := range rps {
			rs = append(rs, cellRun{load: wrkResult{requests: n, duration: time.Second}})
		}
		return rs
	}
	for _, tc := range []struct {
		in          []cellRun
		med, lo, hi float64
	}{
		{runs(300, 100, 200), 200, 100, 300},
		{runs(400, 100, 200, 300), 250, 100, 400},
		{runs(7), 7, 7, 7},
	} {
		med, lo, hi := stats(tc.in, rps)
		if med != tc.med || lo != tc.lo || hi != tc.hi {
			t.Errorf("stats = %v, %v, %v; want %v, %v, %v", med, lo, hi, tc.med, tc.lo, tc.hi)
		}
	}
}

func TestParseFlags(t *testing.T) {
	var sink strings.Builder
	for _, args := range [][]string{
		{"-d", "1500ms"}, {"-d", "0s"}, {"-warmup", "500ms"}, {"-t", "4", "-c", "2"},
		{"-cells", "upstream,haproxy"}, {"-rounds", "0"}, {"extra"},
	} {
		if _, err := parseFlags(args, &sink); err == nil {
			t.Errorf("parseFlags(%q) accepted", args)
		}
	}
	c, err := parseFlags(nil, &sink)
	if err != nil {
		t.Fatal(err)
	}
	if c.threads != 2 || c.connections != 64 || c.duration != 10*time.Second || c.users != 100000 || len(c.cells) != len(cells) {
		t.Errorf("defaults: -t %d -c %d -d %v -users %d, %d cells", c.threads, c.connections, c.duration, c.users, len(c.cells))
	}
}

// TestTargets: each target is judged on the medians of the cells it names,
// and left out when one of them did not run.
func TestTargets(t *testing.T) {
	run := func(rps, cpuMicros float64) cellRun {
		n := int64(rps * 10)
		return cellRun{load: wrkResult{requests: n, duration: 10 * time.Second},
			upstreamCPU: time.Duration(cpuMicros * float64(n) * 1e3), cpuKnown: true}
	}
	byName := func(name string) cell {
		for _, c := range cells {
			if c.name == name {
				return c
			}
		}
		t.Fatalf("no cell %s", name)
		return cell{}
	}
	r := &report{cfg: &config{}}
	for _, c := range []struct {
		name     string
		rps, cpu float64
	}{{"nginx", 30000, 40}, {"sluice-nolimits", 26000, 48}, {"sluice-memory", 24000, 50}, {"sluice-redis", 13000, 80}} {
		r.cells = append(r.cells, byName(c.name))
		r.runs = append(r.runs, []cellRun{run(c.rps, c.cpu)})
	}
	var b strings.Builder
	r.targets(&b)
	got := b.String()
	for _, want := range []string{
		"sluice-memory ÷ nginx, req/s ≥ 0.8×: 0.800× (**met**)",
		"sluice-memory ÷ nginx, CPU per request ≤ 1.3×: 1.250× (**met**)",
		"(limits cost ≤ 10%) ≥ 0.9×: 0.923× (**met**)",
		"sluice-redis ÷ sluice-memory, req/s ≥ 0.6×: 0.542× (**missed**)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("targets:\n%s\nwant a line containing %q", got, want)
		}
	}
	if strings.Contains(got, "traefik") {
		t.Errorf("targets name Traefik, whose cells did not run:\n%s", got)
	}
}
