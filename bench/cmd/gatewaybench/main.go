// Gatewaybench measures requests per second and latency through the sluice
// gateway on loopback: straight to an upstream, through a route without
// limits, through the same route with two limits on the memory store (all
// admitted, and half denied), and with the limits on a Redis it starts
// itself. Each cell measures the closed-loop maximum (a fixed number of
// keep-alive connections, each sending as soon as it is answered) and the
// latency at a fixed open-loop rate, with vegeta as a library. It writes a
// Markdown report.
//
// Usage:
//
//	cd bench && go run ./cmd/gatewaybench [-duration 5s] [-workers 32] [-rate 2000]
//	    [-cells direct,nolimits,memory,memory-deny50,redis] [-repeat N]
//	    [-sluice BINARY] [-gateway-procs 1] [-client-procs 1]
//	    [-profile DIR] [-out FILE] [-quick]
//
// The upstream and the load generator run in this process, the gateway in a
// child process (a built sluice binary with -sluice, otherwise this binary
// running the same CLI code as gateway/cmd/sluice, through gateway/command), and redis-server in
// another; they all share the machine's cores. GOMAXPROCS is set to
// -client-procs here and -gateway-procs in the gateway. Every attack is
// bounded by -duration, and every child is killed at the end.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/internal/redistest"
)

func main() {
	if cfg := os.Getenv(childConfigEnv); cfg != "" {
		os.Exit(runGatewayChild(cfg, os.Getenv(childProfileEnv)))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// cell is one configuration under load.
type cell struct {
	name   string
	about  string
	direct bool // no gateway: the load goes straight to the upstream
	limits limitsKind
	redis  bool
}

// cells are every configuration, in report order.
var cells = []cell{
	{name: "direct", about: "load generator → upstream, no gateway", direct: true},
	{name: "nolimits", about: "gateway route without limits", limits: limitsNone},
	{name: "memory", about: "two limits (per-user token bucket, global fixed window), memory store, all admitted", limits: limitsAdmit},
	{name: "memory-deny50", about: "the same two limits, memory store; every other request on a spent plan → 429", limits: limitsDeny50},
	{name: "redis", about: "two limits, all admitted, Redis standalone store (redis-server on loopback)", limits: limitsAdmit, redis: true},
}

// config is the parsed command line.
type config struct {
	duration, warmup time.Duration
	workers, rate    int
	fixedWorkers     int
	users            int
	cells            []cell
	repeat           int
	sluice           string
	redisServer      string
	gatewayProcs     int
	clientProcs      int
	profileDir       string
	out              string
	quick            bool
	cmdline          string
}

// parseFlags parses args; -quick shortens every phase to a smoke run.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("gatewaybench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	var names string
	fs.DurationVar(&c.duration, "duration", 5*time.Second, "length of each measured attack (max and fixed rate) per cell")
	fs.DurationVar(&c.warmup, "warmup", 500*time.Millisecond, "unmeasured closed-loop load before each cell's max attack")
	fs.IntVar(&c.workers, "workers", 32, "closed-loop connections for the max attack (the gateway keeps 64 idle upstream connections)")
	fs.IntVar(&c.rate, "rate", 2000, "requests per second of the fixed-rate attack")
	fs.IntVar(&c.users, "users", 1000, "distinct X-User-Id values, sent in turn")
	fs.StringVar(&names, "cells", allCellNames(), "comma-separated cells")
	fs.IntVar(&c.repeat, "repeat", 1, "runs of every cell, interleaved in rounds; the report shows medians")
	fs.StringVar(&c.sluice, "sluice", "", "sluice binary to run as the gateway; empty runs this binary's copy of the CLI (gateway/command, the same code as gateway/cmd/sluice)")
	fs.StringVar(&c.redisServer, "redis-server", "redis-server", "redis-server binary for the redis cell")
	fs.IntVar(&c.gatewayProcs, "gateway-procs", 1, "GOMAXPROCS of the gateway process")
	fs.IntVar(&c.clientProcs, "client-procs", 1, "GOMAXPROCS of this process (load generator and upstream)")
	fs.StringVar(&c.profileDir, "profile", "", "write a CPU profile of the gateway in each cell to DIR/CELL-RUN.pprof (not with -sluice)")
	fs.StringVar(&c.out, "out", "", "write the Markdown report to this file too (default: stdout only)")
	fs.BoolVar(&c.quick, "quick", false, "smoke run: 300ms attacks at 200 req/s, 4 connections, 50 users")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if c.quick {
		c.duration, c.warmup, c.workers, c.rate, c.users = 300*time.Millisecond, 100*time.Millisecond, 4, 200, 50
	}
	c.fixedWorkers = 10
	for n := range strings.SplitSeq(names, ",") {
		ce, ok := findCell(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("-cells: unknown cell %q (known: %s)", n, allCellNames())
		}
		c.cells = append(c.cells, ce)
	}
	switch {
	case c.duration <= 0 || c.warmup < 0:
		return nil, fmt.Errorf("-duration must be positive and -warmup not negative, got %v and %v", c.duration, c.warmup)
	case c.workers < 1 || c.rate < 1 || c.users < 1 || c.repeat < 1 || c.gatewayProcs < 1 || c.clientProcs < 1:
		return nil, errors.New("-workers, -rate, -users, -repeat, -gateway-procs and -client-procs must be at least 1")
	case c.profileDir != "" && c.sluice != "":
		return nil, errors.New("-profile needs the built-in gateway child; drop -sluice")
	}
	c.cmdline = "cd bench && go run ./cmd/gatewaybench " + strings.Join(args, " ")
	return c, nil
}

func findCell(name string) (cell, bool) {
	for _, c := range cells {
		if c.name == name {
			return c, true
		}
	}
	return cell{}, false
}

func allCellNames() string {
	names := make([]string, len(cells))
	for i, c := range cells {
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
		fmt.Fprintln(stderr, "gatewaybench:", err)
		return 2
	}
	rep, err := bench(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "gatewaybench:", err)
		return 1
	}
	if err := benchproc.WriteReport(stdout, rep.markdown(), c.out); err != nil {
		fmt.Fprintln(stderr, "gatewaybench:", err)
		return 1
	}
	if n := rep.failedRuns(); n > 0 {
		fmt.Fprintf(stderr, "gatewaybench: %d cell runs had errors, store fallbacks or no requests\n", n)
		return 1
	}
	return 0
}

// bench starts the upstream (and redis-server when a cell needs it), runs
// every cell c.repeat times in interleaved rounds and returns the report.
func bench(ctx context.Context, c *config, logw io.Writer) (*report, error) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(c.clientProcs))
	dir, err := os.MkdirTemp("", "gatewaybench-")
	if err != nil {
		return nil, fmt.Errorf("make temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	if c.profileDir != "" {
		if err := os.MkdirAll(c.profileDir, 0o755); err != nil {
			return nil, fmt.Errorf("make profile dir: %w", err)
		}
	}
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.close()
	var redisAddr string
	for _, ce := range c.cells {
		if ce.redis && redisAddr == "" {
			bin, err := exec.LookPath(c.redisServer)
			if err != nil {
				return nil, fmt.Errorf("the redis cell needs redis-server: %w", err)
			}
			rs, err := redistest.StartServer(redistest.ServerOptions{Bin: bin})
			if err != nil {
				return nil, err
			}
			defer rs.Close()
			redisAddr = rs.Addr()
		}
	}
	rep := &report{cfg: c, started: time.Now().UTC(), goVersion: runtime.Version(), cpus: runtime.NumCPU(), loadBefore: benchproc.LoadAvg()}
	rep.runs = make([][]cellRun, len(c.cells))
	for round := range c.repeat {
		for i, ce := range c.cells {
			fmt.Fprintf(logw, "gatewaybench: round %d/%d: %s\n", round+1, c.repeat, ce.name)
			r, err := runCell(ctx, c, ce, up.addr, redisAddr, dir, round)
			if err != nil {
				return nil, fmt.Errorf("cell %s: %w", ce.name, err)
			}
			rep.runs[i] = append(rep.runs[i], r)
		}
	}
	rep.loadAfter = benchproc.LoadAvg()
	return rep, nil
}

// cellRun is what one run of a cell measured.
type cellRun struct {
	max, fixed      phase
	gatewayCPU      time.Duration // during the max attack; 0 if direct or unknown
	gatewayCPUFixed time.Duration // during the fixed-rate attack; 0 if direct or unknown
	storeTrouble    float64       // store errors + fallback decisions
}

// runCell starts the cell's gateway (unless direct), warms up, runs the max
// attack then the fixed-rate attack, and stops the gateway.
func runCell(ctx context.Context, c *config, ce cell, upstreamAddr, redisAddr, dir string, round int) (cellRun, error) {
	var r cellRun
	base := "http://" + upstreamAddr
	var g *gatewayProc
	if !ce.direct {
		ra := ""
		if ce.redis {
			ra = redisAddr
		}
		spec := gatewaySpec{sluice: c.sluice, procs: c.gatewayProcs, dir: dir, name: fmt.Sprintf("%s-%d", ce.name, round+1)}
		if c.profileDir != "" {
			spec.dir, spec.profile = c.profileDir, true
		}
		var err error
		g, err = startGateway(ctx, spec, func(listen, admin string) string {
			return gatewayConfig(listen, admin, upstreamAddr, ce.limits, ra)
		})
		if err != nil {
			return r, err
		}
		defer g.stop()
		base = "http://" + g.addr
	}
	tr := targeter(base, c.users, ce.limits == limitsDeny50)
	if c.warmup > 0 {
		attack(ctx, tr, 0, c.workers, c.warmup)
	}
	var cpu0 time.Duration
	var cpuOK bool
	if g != nil {
		cpu0, cpuOK = g.cpu()
	}
	r.max = attack(ctx, tr, 0, c.workers, c.duration)
	if g != nil && cpuOK {
		if cpu1, ok := g.cpu(); ok {
			r.gatewayCPU = cpu1 - cpu0
		}
	}
	if g != nil {
		cpu0, cpuOK = g.cpu()
	}
	r.fixed = attack(ctx, tr, c.rate, c.fixedWorkers, c.duration)
	if g != nil && cpuOK {
		if cpu1, ok := g.cpu(); ok {
			r.gatewayCPUFixed = cpu1 - cpu0
		}
	}
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if g != nil {
		n, err := g.storeTrouble()
		if err != nil {
			return r, err
		}
		r.storeTrouble = n
	}
	return r, nil
}
