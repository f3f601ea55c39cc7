// Redisbench measures rate-limit decisions per second and their latency
// against a redis-server it starts itself on a loopback port: sluice's Redis
// store, the same script sent through rueidis and go-redis directly,
// go-redis/redis_rate and ulule/limiter, each over a grid of key counts and
// concurrencies, plus the ceiling that redis-benchmark reaches replaying
// sluice's token-bucket script call with pipelining. It writes a Markdown
// report.
//
// Usage:
//
//	cd bench && go run ./cmd/redisbench [-duration 3s] [-conc 1,16,64,256] [-keys 1000,100000]
//	    [-impl sluice,rueidis-script,goredis-script,redis_rate,ulule] [-out FILE] [-quick] [-pin]
//
// The harness, its clients and redis-server share the machine's cores, so
// the figures describe this machine under that contention, not Redis alone;
// with -pin redis-server has the last CPU to itself, so that the
// redis-benchmark ceiling is Redis' own limit rather than starved.
// It never connects to a Redis it did not start.
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
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the parsed command line.
type config struct {
	duration, warmup time.Duration
	conc, keys       []int
	impls            []impl
	out              string
	quick            bool
	pipeline         int
	ceilingConc      int
	goredisPool      int
	redisServer      string
	redisBenchmark   string
	cmdline          string
	cpuProfile       string
	repeat           int
	flushDelay       time.Duration
	pin              bool
}

// parseFlags parses args; -quick replaces the grid with one small cell per
// implementation.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("redisbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	var conc, keys, names string
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measured time per cell")
	fs.DurationVar(&c.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each cell")
	fs.StringVar(&conc, "conc", "1,16,64,256", "comma-separated concurrencies (goroutines)")
	fs.StringVar(&keys, "keys", "1000,100000", "comma-separated key counts")
	fs.StringVar(&names, "impl", allImplNames(), "comma-separated implementations")
	fs.StringVar(&c.out, "out", "", "write the Markdown report to this file too (default: stdout only)")
	fs.BoolVar(&c.quick, "quick", false, "smoke run: one 300ms cell per implementation (1000 keys, concurrency 16) and a short ceiling")
	fs.IntVar(&c.pipeline, "pipeline", 16, "redis-benchmark -P for the ceiling")
	fs.IntVar(&c.ceilingConc, "ceiling-conc", 256, "redis-benchmark -c (connections) for the ceiling")
	fs.IntVar(&c.goredisPool, "goredis-pool", 0, "go-redis PoolSize; 0 keeps the library default (10 per GOMAXPROCS)")
	fs.StringVar(&c.redisServer, "redis-server", "redis-server", "redis-server binary")
	fs.StringVar(&c.redisBenchmark, "redis-benchmark", "redis-benchmark", "redis-benchmark binary; the ceiling is skipped when it is missing")
	fs.DurationVar(&c.flushDelay, "rueidis-max-flush-delay", 0, "rueidis MaxFlushDelay of the rueidis-script client (sluice's store keeps its own setting)")
	fs.IntVar(&c.repeat, "repeat", 1, "runs of each cell, interleaved in rounds; the report shows the run with the median decisions/s and the range")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the harness process (clients included) to this file")
	fs.BoolVar(&c.pin, "pin", false, "give redis-server the last CPU to itself and keep the harness, its clients and redis-benchmark on the others (Linux, 2 CPUs or more), so that the ceiling is not starved")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if c.quick {
		c.duration, c.warmup, conc, keys = 300*time.Millisecond, 100*time.Millisecond, "16", "1000"
	}
	if c.conc, err = benchproc.ParseInts("-conc", conc); err != nil {
		return nil, err
	}
	if c.keys, err = benchproc.ParseInts("-keys", keys); err != nil {
		return nil, err
	}
	for n := range strings.SplitSeq(names, ",") {
		im, ok := findImpl(strings.TrimSpace(n))
		if !ok {
			return nil, fmt.Errorf("-impl: unknown implementation %q (known: %s)", n, allImplNames())
		}
		c.impls = append(c.impls, im)
	}
	if c.duration <= 0 || c.warmup < 0 {
		return nil, fmt.Errorf("-duration must be positive and -warmup not negative, got %v and %v", c.duration, c.warmup)
	}
	if c.pipeline < 1 || c.ceilingConc < 1 || c.repeat < 1 || c.goredisPool < 0 {
		return nil, fmt.Errorf("-pipeline, -ceiling-conc and -repeat must be at least 1 and -goredis-pool not negative")
	}
	c.cmdline = "cd bench && go run ./cmd/redisbench " + strings.Join(args, " ")
	return c, nil
}

func allImplNames() string {
	names := make([]string, len(impls))
	for i, im := range impls {
		names[i] = im.name
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
		fmt.Fprintln(stderr, "redisbench:", err)
		return 2
	}
	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "redisbench:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "redisbench:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := bench(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "redisbench:", err)
		return 1
	}
	if err := benchproc.WriteReport(stdout, rep.markdown(), c.out); err != nil {
		fmt.Fprintln(stderr, "redisbench:", err)
		return 1
	}
	if n := rep.failedCells(); n > 0 {
		fmt.Fprintf(stderr, "redisbench: %d cells had errors or no decisions\n", n)
		return 1
	}
	return 0
}

// bench starts a server, runs every cell and the ceilings and returns the report.
func bench(ctx context.Context, c *config, logw io.Writer) (*report, error) {
	serverBin, err := exec.LookPath(c.redisServer)
	if err != nil {
		return nil, fmt.Errorf("find redis-server: %w", err)
	}
	srv, err := startServer(ctx, serverBin)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	if c.pin {
		if err := pinCPUs(srv.pid()); err != nil {
			return nil, err
		}
	}
	rep := &report{cfg: c, started: time.Now().UTC(), redisVersion: srv.version,
		goVersion: runtime.Version(), cpus: runtime.NumCPU(), procs: runtime.GOMAXPROCS(0), loadBefore: benchproc.LoadAvg()}
	defer func() { rep.loadAfter = benchproc.LoadAvg() }()
	e := &env{addr: srv.addr, goredisPool: c.goredisPool, flushDelay: c.flushDelay}
	benchBin, benchErr := exec.LookPath(c.redisBenchmark)
	needCall := benchErr == nil || slices.ContainsFunc(c.impls, func(im impl) bool { return im.needsProbe })
	if needCall {
		if e.call, err = captureSluiceCall(ctx, srv.addr); err != nil {
			return nil, err
		}
		rep.call = e.call
	}
	for _, n := range c.keys {
		e.setKeys(keyNames(n))
		if err := runCells(ctx, c, srv, e, rep, logw); err != nil {
			return nil, err
		}
		if benchErr != nil {
			rep.ceilingSkipped = benchErr.Error()
			continue
		}
		cr, err := runCeilings(ctx, c, benchBin, srv, e.call, n, logw)
		if err != nil {
			return nil, err
		}
		rep.ceilings = append(rep.ceilings, cr)
	}
	return rep, nil
}

// runCells runs every (concurrency, implementation) cell on e's key set and
// adds the median of each cell's runs to rep. Implementations alternate
// within each concurrency (and repeats come in rounds), so a change in the
// machine's load during the run hits them alike.
func runCells(ctx context.Context, c *config, srv *server, e *env, rep *report, logw io.Writer) error {
	for _, conc := range c.conc {
		runs := make([][]cellResult, len(c.impls))
		for range c.repeat {
			for i, im := range c.impls {
				r, err := runFlushed(ctx, srv, im, e, conc, c.warmup, c.duration)
				if err != nil {
					return err
				}
				cc, sc, _ := r.cpuPerDecision()
				fmt.Fprintf(logw, "%-15s keys=%-6d conc=%-3d %9.0f decisions/s p50=%v p99=%v errors=%d cpu/decision client=%v redis=%v\n",
					im.name, len(e.keys), conc, r.perSecond(), r.p50, r.p99, r.errors, cc, sc)
				if r.firstErr != nil {
					fmt.Fprintf(logw, "  first error: %v\n", r.firstErr)
				}
				runs[i] = append(runs[i], r)
			}
		}
		for _, rs := range runs {
			rep.cells = append(rep.cells, median(rs))
		}
	}
	return nil
}

// runCeilings measures the ceiling on keys random keys c.repeat times and
// returns the median run.
func runCeilings(ctx context.Context, c *config, bin string, srv *server, call *scriptCall, keys int, logw io.Writer) (ceilingResult, error) {
	if _, err := srv.do(ctx, "FLUSHALL"); err != nil {
		return ceilingResult{}, fmt.Errorf("flush before ceiling: %w", err)
	}
	measure := c.duration
	// The probe must be long enough that connecting the clients and the
	// last partial batches do not dominate it.
	probe := max(20_000, 20*c.ceilingConc*c.pipeline)
	if c.quick {
		measure, probe = 0, 20_000 // the probe is enough for a smoke run
	}
	var crs []ceilingResult
	for range c.repeat {
		cr, err := runCeiling(ctx, bin, srv, call, keys, c.ceilingConc, c.pipeline, measure, probe)
		if err != nil {
			return ceilingResult{}, err
		}
		fmt.Fprintf(logw, "%-15s keys=%-6d conc=%-3d %9.0f decisions/s (-P %d) redis cpu/decision=%v\n",
			"ceiling", keys, cr.clients, cr.rps, cr.pipeline, cr.serverCPUPer)
		crs = append(crs, cr)
	}
	return medianCeiling(crs), nil
}

// runFlushed empties the database, then runs one cell of im.
func runFlushed(ctx context.Context, srv *server, im impl, e *env, conc int, warmup, measure time.Duration) (cellResult, error) {
	if err := ctx.Err(); err != nil {
		return cellResult{}, err
	}
	if _, err := srv.do(ctx, "FLUSHALL"); err != nil {
		return cellResult{}, fmt.Errorf("flush before %s: %w", im.name, err)
	}
	if _, err := srv.do(ctx, "CONFIG", "RESETSTAT"); err != nil {
		return cellResult{}, fmt.Errorf("reset stats before %s: %w", im.name, err)
	}
	runtime.GC()
	r, err := runOne(ctx, im, e, conc, warmup, measure, srv.pid())
	if err != nil {
		return r, err
	}
	if r.scriptTime, r.scriptCalls, err = srv.scriptTimePerCall(ctx); err != nil {
		return r, err
	}
	return r, nil
}

// runOne opens im, runs one cell and closes it.
func runOne(ctx context.Context, im impl, e *env, conc int, warmup, measure time.Duration, serverPID int) (cellResult, error) {
	tg, err := im.open(ctx, e)
	if err != nil {
		return cellResult{}, fmt.Errorf("open %s: %w", im.name, err)
	}
	defer tg.close()
	r := runCell(ctx, tg, len(e.keys), conc, warmup, measure, serverPID)
	r.impl = im.name
	return r, nil
}

// pinCPUs gives redis-server (pid) the last CPU and this process, and so
// the redis-benchmark it starts later, the others.
func pinCPUs(pid int) error {
	n := runtime.NumCPU()
	if n < 2 {
		return fmt.Errorf("-pin needs 2 CPUs or more, this machine has %d", n)
	}
	others := make([]int, n-1)
	for i := range others {
		others[i] = i
	}
	if err := benchproc.Pin(pid, []int{n - 1}); err != nil {
		return err
	}
	if err := benchproc.Pin(os.Getpid(), others); err != nil {
		return err
	}
	runtime.GOMAXPROCS(n - 1)
	return nil
}
