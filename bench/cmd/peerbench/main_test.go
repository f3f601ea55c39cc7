package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	gwconfig "github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// TestMain lets the test binary serve as the upstream, fasthttp and Go TLS
// children that run starts.
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

// TestNginxConfigValid checks the generated nginx.conf, cleartext and with
// TLS on a certificate writeRunCert made, with `nginx -t`.
func TestNginxConfigValid(t *testing.T) {
	bin := sluicetest.RequireProgram(t, "nginx-light", "nginx")
	cert, err := writeRunCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tls  *nginxTLS
		want []string
	}{
		{"cleartext", nil, []string{"limit_req_zone $http_x_user_id zone=peruser:32m", "listen 127.0.0.1:1;"}},
		{"tls", &nginxTLS{certFile: cert.certFile, keyFile: cert.keyFile, http2On: nginxHTTP2On(nginxVersion(bin))},
			[]string{"limit_req_zone $arg_user zone=peruser:32m", "listen 127.0.0.1:1 ssl", "http2", "ssl_protocols TLSv1.3;",
				"ssl_certificate " + cert.certFile + ";", "ssl_certificate_key " + cert.keyFile + ";", "http2_max_concurrent_streams 100;"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "nginx")
			path, err := writeNginxConfig(dir, 1, 2, "127.0.0.1:2", tc.tls)
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
			for _, want := range append(tc.want, "worker_processes 2;", "limit_req zone=peruser", "server 127.0.0.1:2;") {
				if !strings.Contains(string(conf), want) {
					t.Errorf("nginx.conf has no %q:\n%s", want, conf)
				}
			}
			if tc.tls == nil && strings.Contains(string(conf), "ssl") {
				t.Errorf("cleartext nginx.conf mentions ssl:\n%s", conf)
			}
		})
	}
}

func TestNginxHTTP2On(t *testing.T) {
	for v, want := range map[string]bool{
		"nginx/1.22.1": false, "nginx/1.25.0": false, "nginx/1.25.1": true, "nginx/1.26.3": true,
		"nginx/2.0": true, "nginx/1.3": false, "unknown": false, "": false,
	} {
		if got := nginxHTTP2On(v); got != want {
			t.Errorf("nginxHTTP2On(%q) = %v, want %v", v, got, want)
		}
	}
}

// TestSluiceConfig parses the sluice cells' configs with the gateway's own
// parser: the cleartext one keys the per-user limit on X-User-Id; the TLS
// one adds the server.tls listener (TLS 1.3 only, the run's certificate)
// and server.http2, and keys the per-user limit on the user query
// parameter.
func TestSluiceConfig(t *testing.T) {
	cert, err := writeRunCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		tls     *sluiceTLS
		userKey string
	}{
		{"cleartext", nil, "header:X-User-Id"},
		{"tls", &sluiceTLS{listen: "127.0.0.1:8443", certFile: cert.certFile, keyFile: cert.keyFile}, "query:user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := sluiceConfigTLS("127.0.0.1:9", sluiceAdmit, "", tc.tls)
			c, err := gwconfig.Parse("sluice.yaml", []byte(text), func(string) (string, bool) { return "", false })
			if err != nil {
				t.Fatalf("%v\n%s", err, text)
			}
			if len(c.Routes) != 1 || len(c.Routes[0].Limits) != 2 || len(c.Routes[0].Limits[0].Key) != 1 || c.Routes[0].Limits[0].Key[0].String() != tc.userKey {
				t.Errorf("routes: %+v, want one with the per-user limit keyed on %s\n%s", c.Routes, tc.userKey, text)
			}
			if tc.tls == nil {
				if c.Server.TLS != nil {
					t.Errorf("cleartext config has server.tls: %+v", c.Server.TLS)
				}
				return
			}
			tl := c.Server.TLS
			switch {
			case tl == nil:
				t.Fatalf("no server.tls in\n%s", text)
			case tl.Listen != tc.tls.listen || tl.MinVersion != "1.3":
				t.Errorf("server.tls: listen %q, min_version %q", tl.Listen, tl.MinVersion)
			case len(tl.Certificates) != 1 || tl.Certificates[0].CertFile != cert.certFile || tl.Certificates[0].KeyFile != cert.keyFile:
				t.Errorf("server.tls.certificates: %+v", tl.Certificates)
			case c.Server.HTTP2.MaxConcurrentStreams != goProxyMaxStreams:
				t.Errorf("server.http2.max_concurrent_streams = %d, want %d", c.Server.HTTP2.MaxConcurrentStreams, goProxyMaxStreams)
			}
		})
	}
	if got := sluiceConfig("127.0.0.1:9", sluiceAdmit, "127.0.0.1:7"); got != sluiceConfigTLS("127.0.0.1:9", sluiceAdmit, "127.0.0.1:7", nil) {
		t.Errorf("sluiceConfig differs from sluiceConfigTLS without TLS:\n%s", got)
	}
}

// TestWriteRunCert: the certificate is ECDSA P-256, its key pair loads,
// and the pool trusts it for 127.0.0.1 and localhost.
func TestWriteRunCert(t *testing.T) {
	c, err := writeRunCert(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		t.Fatal(err)
	}
	leaf := pair.Leaf
	pub, ok := leaf.PublicKey.(*ecdsa.PublicKey)
	if !ok || pub.Curve != elliptic.P256() {
		t.Fatalf("public key %T, want ECDSA P-256", leaf.PublicKey)
	}
	for _, name := range []string{"127.0.0.1", "localhost"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.pool, DNSName: name}); err != nil {
			t.Errorf("verify for %s: %v", name, err)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: x509.NewCertPool(), DNSName: "127.0.0.1"}); err == nil {
		t.Error("an empty pool trusts the certificate")
	}
	if fi, err := os.Stat(c.keyFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file: %v, %v; want mode 0600", fi, err)
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
		{"-t", "4", "-h2-c", "2"}, {"-t", "4", "-https1-c", "3"}, {"-h2-m", "0"},
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
	if c.h2Conns != 32 || c.h2Streams != 8 || c.https1Conns != 64 || c.h2load != "h2load" {
		t.Errorf("TLS defaults: -h2-c %d -h2-m %d -https1-c %d -h2load %q", c.h2Conns, c.h2Streams, c.https1Conns, c.h2load)
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

// tlsRows parses the TLS cells' table of a report.
func tlsRows(t *testing.T, report string) map[string]map[string]string {
	t.Helper()
	i := strings.Index(report, "| cell | protocol |")
	if i < 0 {
		t.Fatalf("report has no TLS table:\n%s", report)
	}
	return benchproc.TableRows(report[i:])
}

// quickRunTLS runs names once for a second, after a second of warm-up, at
// low concurrency (extra flags come last and may change any of that), and
// checks that the TLS table has a row per cell over
// its protocol with requests per second and CPU per request above zero,
// no errors, and ratios to nginx and to the Go floor (1.00× for the cells
// compared with themselves, n/a when the peer did not run), and that no
// server accepted a TLS 1.2 client.
func quickRunTLS(t *testing.T, names []string, extra ...string) {
	out := filepath.Join(t.TempDir(), "report.md")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var stdout, stderr strings.Builder
	args := append([]string{"-t", "1", "-h2-c", "2", "-h2-m", "4", "-https1-c", "2", "-d", "1s", "-warmup", "1s",
		"-rounds", "1", "-users", "100", "-cells", strings.Join(names, ","), "-out", out}, extra...)
	if code := run(ctx, args, &stdout, &stderr); code != 0 {
		t.Fatalf("run = %d, want 0; stderr:\n%s\nstdout:\n%s", code, stderr.String(), stdout.String())
	}
	report := stdout.String()
	if strings.Contains(report, "| cell | req/s |") {
		t.Errorf("report has a cleartext table, but no cleartext cell ran")
	}
	rows := tlsRows(t, report)
	if len(rows) != len(names) {
		t.Errorf("TLS table has %d rows, want %d", len(rows), len(names))
	}
	ran := map[string]bool{}
	for _, n := range names {
		ran[n] = true
	}
	for _, name := range names {
		row, ok := rows[name]
		if !ok {
			t.Errorf("report has no row for cell %s", name)
			continue
		}
		proto := "HTTP/2"
		if strings.HasSuffix(name, "-https1") {
			proto = "HTTP/1.1"
		}
		if row["protocol"] != proto {
			t.Errorf("%s: protocol = %q, want %q", name, row["protocol"], proto)
		}
		for _, col := range []string{"req/s", "CPU µs/req", "proxy µs/req"} {
			if v, err := strconv.ParseFloat(row[col], 64); err != nil || v <= 0 {
				t.Errorf("%s: %s = %q, want a positive number", name, col, row[col])
			}
		}
		if row["errors"] != "0" {
			t.Errorf("%s: errors = %q, want 0", name, row["errors"])
		}
		_, suffix, _ := strings.Cut(name, "-")
		for peer, cols := range map[string][]string{"nginx": {"req/s ÷ nginx", "CPU ÷ nginx"}, "go": {"req/s ÷ Go", "CPU ÷ Go"}} {
			want := "×"
			switch {
			case !ran[peer+"-"+suffix]:
				want = "n/a"
			case name == peer+"-"+suffix:
				want = "1.00×"
			}
			for _, col := range cols {
				if !strings.HasSuffix(row[col], want) {
					t.Errorf("%s: %s = %q, want a ratio ending in %q", name, col, row[col], want)
				}
			}
		}
	}
	if !strings.Contains(report, "one ECDSA P-256 certificate for the run") || !strings.Contains(report, "-c2 -m4") {
		t.Errorf("report does not state the TLS cells' conditions")
	}
	_, tls12, _ := strings.Cut(report, "these servers accepted a TLS 1.2 client")
	tls12, _, _ = strings.Cut(tls12, "\n")
	for _, name := range names {
		if strings.Contains(tls12, "`"+name+"`") {
			t.Errorf("%s: its server accepts TLS 1.2 clients; every TLS cell serves TLS 1.3 only", name)
		}
	}
	if t.Failed() {
		t.Logf("report:\n%s\nstderr:\n%s", report, stderr.String())
	}
}

// TestQuickRunTLS runs every TLS cell (the Go floor, nginx and sluice,
// over HTTP/2 and HTTPS/1.1) through quickRunTLS.
func TestQuickRunTLS(t *testing.T) {
	sluicetest.RequireProgram(t, "nginx-light", "nginx")
	sluicetest.RequireProgram(t, "nghttp2-client", "h2load")
	quickRunTLS(t, []string{"go-h2", "nginx-h2", "sluice-h2", "go-https1", "nginx-https1", "sluice-https1"})
}

// TestQuickRunTLSAlone runs sluice's TLS cells without their peers: the
// ratios to the peers that did not run are n/a.
func TestQuickRunTLSAlone(t *testing.T) {
	sluicetest.RequireProgram(t, "nghttp2-client", "h2load")
	quickRunTLS(t, []string{"sluice-h2", "sluice-https1"}, "-warmup", "0")
}

func TestParseH2load(t *testing.T) {
	head := "starting benchmark...\nspawning thread #0: 2 total client(s). Timing-based test with 1s of warm-up time and 2s of main duration for measurements.\n" +
		"Warm-up started for thread #0.\nWarm-up phase is over for thread #0.\n" + h2loadMainStarted + "0.\n" +
		"TLS Protocol: TLSv1.3\nCipher: TLS_AES_128_GCM_SHA256\nServer Temp Key: X25519 253 bits\nApplication protocol: h2\n"
	clean := head + "\nfinished in 3.00s, 15000.50 req/s, 1.00MB/s\n" +
		"requests: 30001 total, 30009 started, 30001 done, 30001 succeeded, 0 failed, 0 errored, 0 timeout\n" +
		"status codes: 30005 2xx, 0 3xx, 0 4xx, 0 5xx\n"
	r, err := parseH2load(clean, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l := r.load()
	if l.requests != 30001 || l.duration != 2*time.Second || l.errors != 0 || r.rps != 15000.5 || r.trouble() != "" ||
		r.tlsProtocol != "TLSv1.3" || r.appProtocol != "h2" || r.status2xx != 30005 {
		t.Errorf("clean run: %+v, load %+v, trouble %q", r, l, r.trouble())
	}
	bad := head + "\nfinished in 3.00s, 100.00 req/s, 1.00MB/s\n" +
		"requests: 210 total, 212 started, 210 done, 200 succeeded, 10 failed, 4 errored, 2 timeout\n" +
		"status codes: 190 2xx, 10 3xx, 5 4xx, 1 5xx\n"
	r, err = parseH2load(bad, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l = r.load()
	// 210 done, of which 4 errored without an answer: 206 answers; 10
	// failed (4xx, 5xx, errors) and 10 answers that are 3xx.
	if l.requests != 206 || l.errors != 20 {
		t.Errorf("failing run: load %+v, want 206 requests and 20 errors", l)
	}
	for _, want := range []string{"10 failed", "4 errored", "2 timeout", "190 2xx, 10 3xx, 5 4xx, 1 5xx"} {
		if !strings.Contains(r.trouble(), want) {
			t.Errorf("trouble %q does not say %q", r.trouble(), want)
		}
	}
	if _, err := parseH2load(head, time.Second); err == nil {
		t.Error("parseH2load accepted output without the summary")
	}
}

func TestH2loadArgs(t *testing.T) {
	h := &h2loadRunner{bin: "h2load", threads: 2, uris: "/x/uris.txt", h2Conns: 32, h2Streams: 8, https1Conns: 64}
	for _, tc := range []struct {
		proto  tlsProto
		warmup time.Duration
		want   string
	}{
		{protoH2, 2 * time.Second, "-t 2 -c 32 -m 8 -D 10 --warm-up-time 2 -B https://127.0.0.1:1 -i /x/uris.txt"},
		{protoHTTPS1, 2 * time.Second, "-t 2 -c 64 -m 1 -D 10 --warm-up-time 2 --h1 -B https://127.0.0.1:1 -i /x/uris.txt"},
		{protoH2, 0, "-t 2 -c 32 -m 8 -D 10 -B https://127.0.0.1:1 -i /x/uris.txt"},
	} {
		if got := strings.Join(h.args(tc.proto, "https://127.0.0.1:1", tc.warmup, 10*time.Second), " "); got != tc.want {
			t.Errorf("args(%v, warm-up %v) = %q, want %q", tc.proto, tc.warmup, got, tc.want)
		}
	}
}

// TestWriteURIList: one URI per user, each user once.
func TestWriteURIList(t *testing.T) {
	path, err := writeURIList(t.TempDir(), 50)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for line := range strings.Lines(string(b)) {
		u, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), requestPath+"?user=")
		if n, err := strconv.Atoi(u); !ok || err != nil || n < 1 || n > 50 || seen[u] {
			t.Errorf("URI %q: want %s?user=N for a new N in 1..50", line, requestPath)
		}
		seen[u] = true
	}
	if len(seen) != 50 {
		t.Errorf("%d users in the list, want 50", len(seen))
	}
}

// TestTLSReport: the TLS cells are compared with nginx and the Go floor
// over their own protocol, the cleartext ones with the nginx cell only,
// and a TLS run with failures is counted and described.
func TestTLSReport(t *testing.T) {
	run := func(rps, cpuMicros float64, errs int64, trouble string) cellRun {
		n := int64(rps * 10)
		return cellRun{load: wrkResult{requests: n, duration: 10 * time.Second, errors: errs},
			upstreamCPU: time.Duration(cpuMicros * float64(n) * 1e3), cpuKnown: true, trouble: trouble}
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
		errs     int64
		trouble  string
	}{
		{"nginx", 30000, 40, 0, ""}, {"sluice-memory", 24000, 50, 0, ""},
		{"go-h2", 10000, 100, 0, ""}, {"nginx-h2", 20000, 50, 0, ""}, {"sluice-h2", 15000, 60, 0, ""},
		{"go-https1", 12000, 80, 0, ""}, {"nginx-https1", 40000, 30, 0, ""}, {"sluice-https1", 24000, 40, 3, "3 failed"},
	} {
		r.cells = append(r.cells, byName(c.name))
		r.runs = append(r.runs, []cellRun{run(c.rps, c.cpu, c.errs, c.trouble)})
	}
	md := r.markdown()
	clear := benchproc.TableRows(md)
	if len(clear) != 2 || clear["sluice-memory"]["req/s ÷ nginx"] != "0.80×" {
		t.Errorf("cleartext table: %v", clear)
	}
	rows := tlsRows(t, md)
	for name, want := range map[string][4]string{
		"go-h2":         {"0.50×", "1.00×", "2.00×", "1.00×"},
		"sluice-h2":     {"0.75×", "1.50×", "1.20×", "0.60×"},
		"nginx-https1":  {"1.00×", "3.33×", "1.00×", "0.38×"},
		"sluice-https1": {"0.60×", "2.00×", "1.33×", "0.50×"},
	} {
		row := rows[name]
		got := [4]string{row["req/s ÷ nginx"], row["req/s ÷ Go"], row["CPU ÷ nginx"], row["CPU ÷ Go"]}
		if got != want {
			t.Errorf("%s: ratios %v, want %v", name, got, want)
		}
	}
	if rows["sluice-https1"]["errors"] != "3" || !strings.Contains(md, "- `sluice-https1`, round 1: 3 failed") {
		t.Errorf("the failing run is not reported:\n%s", md)
	}
	if n := r.failedRuns(); n != 1 {
		t.Errorf("failedRuns = %d, want 1", n)
	}
	if strings.Contains(md, "accepted a TLS 1.2 client") {
		t.Errorf("the report says a server accepted TLS 1.2, but none did:\n%s", md)
	}
	r.runs[4][0].acceptsTLS12 = true // sluice-h2
	if md = r.markdown(); !strings.Contains(md, "these servers accepted a TLS 1.2 client (their measured connections negotiated TLS 1.3): `sluice-h2`.") {
		t.Errorf("the report does not name sluice-h2 as accepting TLS 1.2:\n%s", md)
	}
}

// TestAcceptsTLS12: a server that allows TLS 1.2 accepts the probe, one
// limited to TLS 1.3 does not.
func TestAcceptsTLS12(t *testing.T) {
	for _, min := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		srv := httptest.NewUnstartedServer(http.NotFoundHandler())
		srv.TLS = &tls.Config{MinVersion: min}
		srv.StartTLS()
		if got, want := acceptsTLS12(srv.Listener.Addr().String()), min == tls.VersionTLS12; got != want {
			t.Errorf("server with MinVersion %s: acceptsTLS12 = %v, want %v", tls.VersionName(min), got, want)
		}
		srv.Close()
	}
}
