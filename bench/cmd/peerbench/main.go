// Peerbench measures the sluice gateway against its peers on loopback, with
// one command: the Go upstream directly, nginx's limit_req, a bare fasthttp
// reverse proxy (the floor), sluice without limits, with limits on the
// memory store and on Redis, and Traefik's rateLimit when a Traefik binary
// is given. Every cell forwards to the same upstream and is loaded by wrk
// with a random X-User-Id over -users users per request; the limits admit
// everything, so the cells measure the cost of deciding, not of denying.
//
// The TLS cells terminate HTTPS in front of the same upstream, each over
// HTTP/2 (-h2 cells) and over HTTP/1.1 (-https1 cells): a bare net/http
// reverse proxy (the Go floor), nginx with limit_req and sluice with the
// sluice-memory limits. They serve one ECDSA P-256 certificate generated
// for the run, TLS 1.3 only, and are loaded by h2load, which keeps its
// connections from the warm-up to the end of the run and walks a shuffled
// list of -users URIs that carry the user in the query parameter user
// (h2load sends the same headers with every request), on which their
// limits are keyed.
//
// Usage:
//
//	cd bench && go run ./cmd/peerbench [-t 2] [-c 64] [-d 10s] [-warmup 2s]
//	    [-rounds 3] [-users 100000] [-cells upstream,nginx,...]
//	    [-h2-c 32] [-h2-m 8] [-https1-c 64]
//	    [-nginx-workers 2] [-sluice BINARY] [-traefik BINARY]
//	    [-nginx nginx] [-wrk wrk] [-h2load h2load]
//	    [-redis-server redis-server] [-out FILE]
//
// Each round runs every cell once, in an order rotated by one cell per
// round; each cell run starts its servers, warms up, loads them for -d and
// stops them. The report gives, per cell, the median and range over the
// rounds of the requests per second and of the CPU time per request of the
// proxy and the upstream (utime+stime from /proc/<pid>/stat, summed over
// each process tree), and both as ratios to nginx's medians (for a TLS
// cell, nginx's over the same protocol) and, for the TLS cells, to the Go
// floor's. CPU time of the Redis a cell uses is shown apart.
//
// Everything listens on 127.0.0.1 on free ports. The upstream and the
// fasthttp and Go proxies are this binary in child mode; sluice is built
// from this module's sluice (or -sluice); every child is stopped by its PID
// at the end, also on an error or Ctrl-C, and dies with the harness on
// Linux.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

func main() {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cellKind is what serves a cell's requests.
type cellKind int

const (
	kindUpstream cellKind = iota
	kindNginx
	kindFastProxy
	kindSluice
	kindTraefik
	kindGoProxy // the Go floor of the TLS cells
)

// cell is one configuration under load.
type cell struct {
	name   string
	about  string
	kind   cellKind
	limits sluiceLimits // sluice cells only
	redis  bool         // the cell's limits live in a Redis the cell starts
	proto  tlsProto     // protoNone: cleartext, loaded by wrk; else TLS, by h2load
}

// cells are every configuration, in report order.
var cells = []cell{
	{name: "upstream", about: "wrk → the Go upstream (fasthttp), no proxy", kind: kindUpstream},
	{name: "nginx", about: "nginx, limit_req zone keyed on X-User-Id (never denies), %d workers, kept-alive upstream connections", kind: kindNginx},
	{name: "fasthttp", about: "a bare fasthttp reverse proxy, no limits: the floor", kind: kindFastProxy},
	{name: "sluice-nolimits", about: "sluice, route without limits", kind: kindSluice, limits: sluiceNoLimits},
	{name: "sluice-memory", about: "sluice, per-user token bucket on X-User-Id + global fixed window, memory store", kind: kindSluice, limits: sluiceAdmit},
	{name: "sluice-redis", about: "sluice, the same two limits on a Redis standalone store (its own redis-server)", kind: kindSluice, limits: sluiceAdmit, redis: true},
	{name: "traefik-memory", about: "Traefik, rateLimit keyed on X-User-Id, in memory (-traefik only)", kind: kindTraefik},
	{name: "traefik-redis", about: "Traefik, rateLimit keyed on X-User-Id, in Redis (-traefik 3.4+ only; its own redis-server)", kind: kindTraefik, redis: true},
	{name: "go-h2", about: "h2load → a bare Go net/http reverse proxy (httputil.ReverseProxy), HTTP/2 over TLS, no limits: the Go floor", kind: kindGoProxy, proto: protoH2},
	{name: "nginx-h2", about: "h2load → nginx, ssl and http2, limit_req zone keyed on the user query parameter (never denies), %d workers, HTTP/2 over TLS", kind: kindNginx, proto: protoH2},
	{name: "sluice-h2", about: "h2load → sluice's TLS listener, the sluice-memory limits with the per-user key on the user query parameter, memory store, HTTP/2 over TLS", kind: kindSluice, limits: sluiceAdmit, proto: protoH2},
	{name: "go-https1", about: "h2load --h1 → the Go floor over HTTPS/1.1", kind: kindGoProxy, proto: protoHTTPS1},
	{name: "nginx-https1", about: "h2load --h1 → nginx-h2's nginx over HTTPS/1.1, %d workers", kind: kindNginx, proto: protoHTTPS1},
	{name: "sluice-https1", about: "h2load --h1 → sluice-h2's sluice over HTTPS/1.1", kind: kindSluice, limits: sluiceAdmit, proto: protoHTTPS1},
}

// requestPath is the path every request asks for; sluice's route matches it.
const requestPath = "/api/bench"

// config is the parsed command line.
type config struct {
	threads, connections int
	// h2Conns and h2Streams are h2load's HTTP/2 connections and streams in
	// flight on each; https1Conns its HTTP/1.1 connections.
	h2Conns, h2Streams, https1Conns int
	duration, warmup                time.Duration
	rounds, users                   int
	cells                           []cell
	nginxWorkers                    int
	sluice, traefik                 string
	nginx, wrk, h2load, redis       string
	out                             string
	cmdline                         string
}

// parseFlags parses args.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("peerbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	var names string
	fs.IntVar(&c.threads, "t", 2, "wrk and h2load threads")
	fs.IntVar(&c.connections, "c", 64, "wrk connections (kept alive)")
	fs.IntVar(&c.h2Conns, "h2-c", 32, "h2load connections of the HTTP/2 cells (held for the whole run)")
	fs.IntVar(&c.h2Streams, "h2-m", 8, "h2load streams in flight per HTTP/2 connection")
	fs.IntVar(&c.https1Conns, "https1-c", 64, "h2load connections of the HTTPS/1.1 cells (held for the whole run, one request in flight each)")
	fs.DurationVar(&c.duration, "d", 10*time.Second, "measured load per cell run, whole seconds")
	fs.DurationVar(&c.warmup, "warmup", 2*time.Second, "unmeasured load before each measured one, whole seconds; 0 for none")
	fs.IntVar(&c.rounds, "rounds", 3, "rounds; each runs every cell once, the order rotated by one cell per round")
	fs.IntVar(&c.users, "users", 100000, "distinct X-User-Id values, drawn at random per request")
	fs.StringVar(&names, "cells", cellNames(cells), "comma-separated cells to run")
	fs.IntVar(&c.nginxWorkers, "nginx-workers", 2, "nginx worker_processes")
	fs.StringVar(&c.sluice, "sluice", "", "sluice binary; empty builds the gateway module's gateway/cmd/sluice")
	fs.StringVar(&c.traefik, "traefik", "", "Traefik binary; empty skips the traefik cells")
	fs.StringVar(&c.nginx, "nginx", "nginx", "nginx binary")
	fs.StringVar(&c.wrk, "wrk", "wrk", "wrk binary")
	fs.StringVar(&c.h2load, "h2load", "h2load", "h2load binary (Debian's nghttp2-client) for the TLS cells")
	fs.StringVar(&c.redis, "redis-server", "redis-server", "redis-server binary for the Redis cells")
	fs.StringVar(&c.out, "out", "", "write the Markdown report to this file too")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for n := range strings.SplitSeq(names, ",") {
		i := slices.IndexFunc(cells, func(ce cell) bool { return ce.name == strings.TrimSpace(n) })
		if i < 0 {
			return nil, fmt.Errorf("-cells: unknown cell %q (known: %s)", n, cellNames(cells))
		}
		c.cells = append(c.cells, cells[i])
	}
	switch {
	case c.threads < 1 || c.connections < c.threads:
		return nil, fmt.Errorf("-t must be at least 1 and -c at least -t, got -t %d -c %d", c.threads, c.connections)
	case c.h2Conns < c.threads || c.https1Conns < c.threads || c.h2Streams < 1:
		return nil, fmt.Errorf("-h2-c and -https1-c must be at least -t and -h2-m at least 1, got -t %d -h2-c %d -https1-c %d -h2-m %d",
			c.threads, c.h2Conns, c.https1Conns, c.h2Streams)
	case c.duration < time.Second || c.duration%time.Second != 0:
		return nil, fmt.Errorf("-d must be a whole number of seconds, at least 1s (wrk's and h2load's unit), got %v", c.duration)
	case c.warmup < 0 || c.warmup%time.Second != 0:
		return nil, fmt.Errorf("-warmup must be 0 or a whole number of seconds, got %v", c.warmup)
	case c.rounds < 1 || c.users < 1 || c.nginxWorkers < 1:
		return nil, errors.New("-rounds, -users and -nginx-workers must be at least 1")
	}
	c.cmdline = "cd bench && go run ./cmd/peerbench " + strings.Join(args, " ")
	return c, nil
}

func cellNames(cs []cell) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	return strings.Join(names, ",")
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "peerbench:", err)
		return 2
	}
	rep, err := bench(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "peerbench:", err)
		return 1
	}
	if err := benchproc.WriteReport(stdout, rep.markdown(), c.out); err != nil {
		fmt.Fprintln(stderr, "peerbench:", err)
		return 1
	}
	if n := rep.failedRuns(); n > 0 {
		fmt.Fprintf(stderr, "peerbench: %d cell runs had errors, non-2xx answers, store fallbacks or no requests\n", n)
		return 1
	}
	return 0
}

// tools are the resolved programs a run uses.
type tools struct {
	wrk, h2load, nginx, redis, sluice, traefik string
	traefikRedis                               bool
}

// resolveTools finds every program the selected cells need, builds sluice
// when no binary is given, and drops the Traefik cells that cannot run,
// saying why on logw. It returns the cells left.
func resolveTools(c *config, dir string, logw io.Writer) (tools, []cell, error) {
	var t tools
	var err error
	need := func(what string, name *string, path string) error {
		if err != nil {
			return err
		}
		*name, err = exec.LookPath(path)
		if err != nil {
			err = fmt.Errorf("%s needs %s: %w", what, path, err)
		}
		return err
	}
	var left []cell
	for _, ce := range c.cells {
		switch {
		case ce.kind == kindNginx && t.nginx == "":
			need("the nginx cells", &t.nginx, c.nginx)
		case ce.kind == kindTraefik && c.traefik == "":
			fmt.Fprintf(logw, "peerbench: skipping %s: no -traefik binary given\n", ce.name)
			continue
		case ce.kind == kindTraefik && t.traefik == "":
			if need("the traefik cells", &t.traefik, c.traefik) == nil {
				var v string
				v, t.traefikRedis, err = traefikVersion(t.traefik)
				if err == nil {
					fmt.Fprintf(logw, "peerbench: Traefik %s\n", v)
				}
			}
		}
		if ce.kind == kindTraefik && ce.redis && err == nil && !t.traefikRedis {
			fmt.Fprintf(logw, "peerbench: skipping %s: this Traefik's rateLimit has no Redis store (3.4 and later have)\n", ce.name)
			continue
		}
		switch {
		case ce.proto == protoNone && t.wrk == "":
			need("the cleartext cells", &t.wrk, c.wrk)
		case ce.proto != protoNone && t.h2load == "":
			need("the TLS cells", &t.h2load, c.h2load)
		}
		if ce.redis && t.redis == "" {
			need("the Redis cells", &t.redis, c.redis)
		}
		if ce.kind == kindSluice && t.sluice == "" && err == nil {
			if c.sluice != "" {
				need("the sluice cells", &t.sluice, c.sluice)
			} else {
				fmt.Fprintln(logw, "peerbench: building sluice")
				t.sluice, err = sluicetest.Build(dir, false)
			}
		}
		left = append(left, ce)
	}
	if err != nil {
		return t, nil, err
	}
	if len(left) == 0 {
		return t, nil, errors.New("no cell left to run")
	}
	return t, left, nil
}

// bench starts the upstream, runs every cell c.rounds times in rotated
// rounds and returns the report.
func bench(ctx context.Context, c *config, logw io.Writer) (*report, error) {
	dir, err := os.MkdirTemp("", "peerbench-")
	if err != nil {
		return nil, fmt.Errorf("make temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	t, run, err := resolveTools(c, dir, logw)
	if err != nil {
		return nil, err
	}
	// Every cell run is bounded: startup, warm-up, load and shutdown.
	perRun := c.warmup + c.duration + 2*time.Minute
	ctx, cancel := context.WithTimeout(ctx, time.Duration(c.rounds*len(run))*perRun)
	defer cancel()
	l := &loaders{}
	if t.wrk != "" {
		if l.wrk, err = newWrkRunner(t.wrk, dir, c.threads, c.connections, c.users); err != nil {
			return nil, err
		}
	}
	if t.h2load != "" {
		uris, err := writeURIList(dir, c.users)
		if err != nil {
			return nil, err
		}
		l.h2load = &h2loadRunner{bin: t.h2load, threads: c.threads, uris: uris,
			h2Conns: c.h2Conns, h2Streams: c.h2Streams, https1Conns: c.https1Conns}
		if l.cert, err = writeRunCert(dir); err != nil {
			return nil, err
		}
	}
	up, upAddr, err := startSelfChild(modeUpstream, "")
	if err != nil {
		return nil, err
	}
	defer up.stop(syscall.SIGTERM, 5*time.Second)
	rep := &report{cfg: c, cells: run, started: time.Now().UTC(), goVersion: runtime.Version(), cpus: runtime.NumCPU(),
		loadBefore: benchproc.LoadAvg()}
	if t.wrk != "" {
		rep.wrkVersion = wrkVersion(t.wrk)
	}
	if t.h2load != "" {
		rep.h2loadVersion = h2loadVersion(t.h2load)
	}
	if t.nginx != "" {
		rep.nginxVersion = nginxVersion(t.nginx)
		l.nginxHTTP2On = nginxHTTP2On(rep.nginxVersion)
	}
	rep.runs = make([][]cellRun, len(run))
	for round := range c.rounds {
		for j := range run {
			i := (j + round) % len(run)
			fmt.Fprintf(logw, "peerbench: round %d/%d: %s\n", round+1, c.rounds, run[i].name)
			r, err := runCell(ctx, c, t, l, run[i], up, upAddr, filepath.Join(dir, fmt.Sprintf("%s-%d", run[i].name, round+1)))
			if err != nil {
				return nil, fmt.Errorf("cell %s, round %d: %w", run[i].name, round+1, err)
			}
			rep.runs[i] = append(rep.runs[i], r)
		}
	}
	rep.loadAfter = benchproc.LoadAvg()
	return rep, nil
}

// loaders are what loads the cells: wrk for the cleartext ones, h2load and
// the run's certificate for the TLS ones (nil when no such cell runs).
type loaders struct {
	wrk          *wrkRunner
	h2load       *h2loadRunner
	cert         *runCert
	nginxHTTP2On bool // the nginx has the http2 directive
}

// cellRun is what one run of a cell measured.
type cellRun struct {
	load         wrkResult
	proxyCPU     time.Duration // the proxy's process tree; 0 for the upstream cell
	upstreamCPU  time.Duration
	redisCPU     time.Duration // the cell's redis-server; 0 without one
	cpuKnown     bool
	storeTrouble float64 // sluice: store errors + fallback decisions
	// trouble describes an h2load run's failed requests and non-2xx
	// answers; empty when there are none.
	trouble string
	// acceptsTLS12 says a TLS cell's server completed a handshake with a
	// client that offered TLS 1.2 at most, although it is configured for
	// TLS 1.3 only.
	acceptsTLS12 bool
}

// server is a running proxy under test.
type server struct {
	addr string
	pid  int // 0: no proxy process (the upstream cell)
	stop func()
	// exited is closed when the proxy process exits.
	exited <-chan struct{}
	// check, when not nil, returns the store trouble after the load.
	check func() (float64, error)
	// logs returns the end of the proxy's output, for error messages.
	logs func() string
}

// runCell starts the cell's Redis (if any) and proxy, waits until the proxy
// answers, warms up, loads it for c.duration while reading CPU times, and
// stops everything it started.
func runCell(ctx context.Context, c *config, t tools, l *loaders, ce cell, up *child, upAddr, dir string) (cellRun, error) {
	var r cellRun
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, fmt.Errorf("make cell dir: %w", err)
	}
	var rs *redistest.Server
	if ce.redis {
		var err error
		rs, err = redistest.StartServer(redistest.ServerOptions{Bin: t.redis})
		if err != nil {
			return r, err
		}
		defer rs.Close()
	}
	srv, err := startServer(c, t, l, ce, upAddr, dir, rs)
	if err != nil {
		return r, err
	}
	defer srv.stop()
	var before, after cpuTimes
	if ce.proto == protoNone {
		url := "http://" + srv.addr + requestPath
		if err := waitAnswers(ctx, http.DefaultTransport, url, srv.exited, 15*time.Second); err != nil {
			return r, fmt.Errorf("%s on %s: %w; its output:\n%s", ce.name, srv.addr, err, srv.logs())
		}
		if c.warmup > 0 {
			if _, err := l.wrk.run(ctx, url, c.warmup); err != nil {
				return r, fmt.Errorf("warm-up: %w", err)
			}
		}
		before = readCPU(srv.pid, up.pid(), rs)
		r.load, err = l.wrk.run(ctx, url, c.duration)
		if err != nil {
			return r, err
		}
	} else {
		base := "https://" + srv.addr
		tr := tlsTransport(l.cert, ce.proto)
		err := waitAnswers(ctx, tr, base+requestPath+"?"+userQuery+"=1", srv.exited, 15*time.Second)
		tr.CloseIdleConnections()
		if err != nil {
			return r, fmt.Errorf("%s on %s: %w; its output:\n%s", ce.name, srv.addr, err, srv.logs())
		}
		r.acceptsTLS12 = acceptsTLS12(srv.addr)
		// The CPU times are read when h2load's measured duration starts,
		// after the warm-up on the same connections.
		res, err := l.h2load.run(ctx, ce.proto, base, c.warmup, c.duration, func() { before = readCPU(srv.pid, up.pid(), rs) })
		if err != nil {
			return r, err
		}
		r.load, r.trouble = res.load(), res.trouble()
	}
	after = readCPU(srv.pid, up.pid(), rs)
	if before.ok && after.ok {
		r.cpuKnown = true
		r.proxyCPU = after.proxy - before.proxy
		r.upstreamCPU = after.upstream - before.upstream
		r.redisCPU = after.redis - before.redis
	}
	if srv.check != nil {
		if r.storeTrouble, err = srv.check(); err != nil {
			return r, err
		}
	}
	return r, nil
}

// startServer starts the cell's proxy in front of upAddr; a TLS cell's
// server has its HTTPS listener's address.
func startServer(c *config, t tools, l *loaders, ce cell, upAddr, dir string, rs *redistest.Server) (*server, error) {
	redisAddr := ""
	if rs != nil {
		redisAddr = rs.Addr()
	}
	switch ce.kind {
	case kindUpstream:
		return &server{addr: upAddr, stop: func() {}, logs: func() string { return "(the upstream's is not kept)" }}, nil
	case kindFastProxy:
		p, addr, err := startSelfChild(modeFastProxy, upAddr)
		if err != nil {
			return nil, err
		}
		return &server{addr: addr, pid: p.pid(), exited: p.exited, logs: p.log.String,
			stop: func() { p.stop(syscall.SIGTERM, 5*time.Second) }}, nil
	case kindGoProxy:
		p, addr, err := startSelfChild(modeGoTLS, upAddr, childCertEnv+"="+l.cert.certFile, childKeyEnv+"="+l.cert.keyFile)
		if err != nil {
			return nil, err
		}
		return &server{addr: addr, pid: p.pid(), exited: p.exited, logs: p.log.String,
			stop: func() { p.stop(syscall.SIGTERM, 5*time.Second) }}, nil
	case kindNginx:
		port, err := redistest.FreePort()
		if err != nil {
			return nil, err
		}
		var tlsConf *nginxTLS
		if ce.proto != protoNone {
			tlsConf = &nginxTLS{certFile: l.cert.certFile, keyFile: l.cert.keyFile, http2On: l.nginxHTTP2On}
		}
		p, err := startNginx(t.nginx, dir, port, c.nginxWorkers, upAddr, tlsConf)
		if err != nil {
			return nil, err
		}
		return &server{addr: fmt.Sprintf("127.0.0.1:%d", port), pid: p.pid(), exited: p.exited,
			logs: func() string { return p.log.String() + nginxErrorLog(dir) },
			stop: func() { p.stop(syscall.SIGTERM, nginxStopGrace) }}, nil
	case kindTraefik:
		port, err := redistest.FreePort()
		if err != nil {
			return nil, err
		}
		p, err := startTraefik(t.traefik, dir, port, upAddr, redisAddr)
		if err != nil {
			return nil, err
		}
		return &server{addr: fmt.Sprintf("127.0.0.1:%d", port), pid: p.pid(), exited: p.exited, logs: p.log.String,
			stop: func() { p.stop(syscall.SIGTERM, 10*time.Second) }}, nil
	case kindSluice:
		var tlsConf *sluiceTLS
		if ce.proto != protoNone {
			port, err := redistest.FreePort()
			if err != nil {
				return nil, err
			}
			tlsConf = &sluiceTLS{listen: fmt.Sprintf("127.0.0.1:%d", port), certFile: l.cert.certFile, keyFile: l.cert.keyFile}
		}
		s, err := startSluice(t.sluice, dir, ce.name, sluiceConfigTLS(upAddr, ce.limits, redisAddr, tlsConf))
		if err != nil {
			return nil, err
		}
		addr := s.addr
		if tlsConf != nil {
			addr = tlsConf.listen
		}
		return &server{addr: addr, pid: s.p.PID(), exited: s.p.Exited(), check: s.storeTrouble,
			logs: func() string { return s.p.Logs().String() }, stop: func() { s.p.Stop(10 * time.Second) }}, nil
	}
	return nil, fmt.Errorf("unknown cell kind %d", ce.kind)
}

// waitAnswers polls url through rt every 20 ms until it answers 200, the
// process behind it exits (exited, which may be nil), ctx ends or timeout
// passes.
func waitAnswers(ctx context.Context, rt http.RoundTripper, url string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	client := &http.Client{Transport: rt, Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-User-Id", "1")
		resp, err := client.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("answered %s", resp.Status)
		}
		select {
		case <-exited:
			return fmt.Errorf("%w before it answered: %v", errExited, err)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no 200 within %v: %w", timeout, err)
		}
	}
}

// cpuTimes are the CPU times used so far by a cell's processes.
type cpuTimes struct {
	proxy, upstream, redis time.Duration
	ok                     bool
}

// readCPU reads the CPU time of the proxy's process tree (none when
// proxyPID is 0), the upstream's and the Redis server's (when rs is not nil).
func readCPU(proxyPID, upstreamPID int, rs *redistest.Server) cpuTimes {
	var t cpuTimes
	var ok1, ok2, ok3 = true, true, true
	if proxyPID != 0 {
		t.proxy, ok1 = benchproc.TreeCPU(proxyPID)
	}
	t.upstream, ok2 = benchproc.TreeCPU(upstreamPID)
	if rs != nil {
		t.redis, ok3 = benchproc.ProcessCPU(rs.PID())
	}
	t.ok = ok1 && ok2 && ok3
	return t
}

// tlsTransport returns a transport that trusts only cert, speaks TLS 1.3
// only and proto (HTTP/2 or HTTP/1.1) only, for waitAnswers.
func tlsTransport(cert *runCert, proto tlsProto) *http.Transport {
	var protocols http.Protocols
	protocols.SetHTTP1(proto == protoHTTPS1)
	protocols.SetHTTP2(proto == protoH2)
	return &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: cert.pool, MinVersion: tls.VersionTLS13},
		Protocols:       &protocols,
	}
}

// acceptsTLS12 reports whether the TLS server on addr completes a
// handshake with a client that offers TLS 1.2 at most, whatever its
// certificate. Every TLS cell is configured for TLS 1.3 only; one that
// does not refuse is reported.
func acceptsTLS12(addr string) bool {
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second},
		// Only the version matters here, and no request is sent.
		Config: &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
