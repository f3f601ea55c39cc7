// Command clusterbench measures sluice's Redis store on one standalone
// redis-server and on a Redis Cluster of several masters, in the same run,
// and shows how the decisions spread across the cluster's shards: per master,
// its share of the script calls and of the keys, and the Redis CPU it spent
// per decision. docs/scaling.md sizes deployments from these figures.
//
// Every server is a redis-server child on 127.0.0.1 (internal/redistest),
// stopped when the run ends. Cells run in rounds, interleaved; the report
// shows the median round of each cell and the range.
//
//	go run ./cmd/clusterbench -masters 3 -conc 64,256 -keys 100000 -duration 3s -repeat 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sluice-gw/sluice/bench/internal/benchproc"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/redis"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// config is the parsed command line.
type config struct {
	masters  int
	conc     []int
	keys     int
	duration time.Duration
	warmup   time.Duration
	repeat   int
	out      string
}

func parseFlags(args []string, stderr io.Writer) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet("clusterbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conc string
	fs.IntVar(&c.masters, "masters", 3, "masters of the cluster")
	fs.StringVar(&conc, "conc", "64,256", "comma-separated concurrencies (goroutines)")
	fs.IntVar(&c.keys, "keys", 100_000, "distinct keys, chosen at random per decision")
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measured time per cell")
	fs.DurationVar(&c.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each cell")
	fs.IntVar(&c.repeat, "repeat", 3, "rounds; cells are interleaved within each round")
	fs.StringVar(&c.out, "out", "", "write the Markdown report to this file too")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for f := range strings.SplitSeq(conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-conc: want positive integers, got %q", f)
		}
		c.conc = append(c.conc, n)
	}
	switch {
	case c.masters < 2:
		return nil, fmt.Errorf("-masters %d: want at least 2", c.masters)
	case c.keys < 1:
		return nil, fmt.Errorf("-keys %d: want at least 1", c.keys)
	case c.repeat < 1:
		return nil, fmt.Errorf("-repeat %d: want at least 1", c.repeat)
	case c.duration <= 0:
		return nil, fmt.Errorf("-duration %s: want a positive duration", c.duration)
	}
	return c, nil
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "clusterbench:", err)
		return 2
	}
	rep, err := bench(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "clusterbench:", err)
		return 1
	}
	if err := benchproc.WriteReport(stdout, rep.markdown(), c.out); err != nil {
		fmt.Fprintln(stderr, "clusterbench:", err)
		return 1
	}
	if rep.failed() {
		fmt.Fprintln(stderr, "clusterbench: some cells had errors or no decisions")
		return 1
	}
	return 0
}

// policy admits every decision of a run: the cells measure deciding. Its
// slow refill keeps every key used in a run stored until the run ends (a
// key's TTL is the time its bucket takes to refill), so the keys per master
// show where state lives.
var policy = ratelimit.MustPolicy(ratelimit.PolicyConfig{
	Name: "bench", Algorithm: ratelimit.TokenBucket, Capacity: 1e12, Rate: 1,
})

// deployment is one place the store's state lives: its nodes and a store
// connected to them.
type deployment struct {
	name  string
	nodes []*redistest.Server // the masters
	store *redis.Store
}

// cell is one measured run of a deployment at one concurrency.
type cell struct {
	deployment string
	conc       int
	decisions  int64
	errors     int64
	elapsed    time.Duration
	clientCPU  time.Duration   // this process
	nodeCPU    []time.Duration // per node
	nodeCalls  []int64         // script calls per node during the cell
	nodeKeys   []int64         // DBSIZE per node after the cell
}

func (c *cell) rate() float64 { return float64(c.decisions) / c.elapsed.Seconds() }

func (c *cell) redisCPU() time.Duration {
	var d time.Duration
	for _, x := range c.nodeCPU {
		d += x
	}
	return d
}

func bench(ctx context.Context, c *config, logw io.Writer) (*report, error) {
	if err := redistest.Available(); err != nil {
		return nil, err
	}
	single, err := redistest.StartServer(redistest.ServerOptions{})
	if err != nil {
		return nil, err
	}
	defer single.Close()
	cl, err := redistest.StartCluster(redistest.ClusterOptions{Masters: c.masters})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	// A generous timeout: on two shared cores a tight one would turn CPU
	// contention into errors rather than latency.
	ss, err := redis.New(redis.Options{Mode: redis.Standalone, Addrs: []string{single.Addr()}, Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	defer ss.Close()
	addrs := make([]string, len(cl.Masters))
	for i, m := range cl.Masters {
		addrs[i] = m.Addr()
	}
	cs, err := redis.New(redis.Options{Mode: redis.Cluster, Addrs: addrs, Timeout: 5 * time.Second})
	if err != nil {
		return nil, err
	}
	defer cs.Close()
	deps := []*deployment{
		{name: "standalone", nodes: []*redistest.Server{single}, store: ss},
		{name: fmt.Sprintf("cluster-%d", c.masters), nodes: cl.Masters, store: cs},
	}
	keys := make([]string, c.keys)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	rep := &report{cfg: c, started: time.Now().UTC(), cpus: runtime.NumCPU(), loadBefore: benchproc.LoadAvg()}
	for round := range c.repeat {
		for i := range deps {
			d := deps[(i+round)%len(deps)] // rotate the order each round
			for _, n := range c.conc {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				cl, err := measure(ctx, c, d, keys, n)
				if err != nil {
					return nil, fmt.Errorf("%s at concurrency %d: %w", d.name, n, err)
				}
				fmt.Fprintf(logw, "round %d %s conc %d: %.0f decisions/s\n", round+1, d.name, n, cl.rate())
				rep.cells = append(rep.cells, cl)
			}
		}
	}
	rep.loadAfter = benchproc.LoadAvg()
	return rep, nil
}

// measure runs one cell: n goroutines deciding random keys for c.duration
// after c.warmup, with the nodes' CPU and script calls read around it.
func measure(ctx context.Context, c *config, d *deployment, keys []string, n int) (*cell, error) {
	run := func(dur time.Duration) (decisions, errs int64) {
		var done atomic.Bool
		var wg sync.WaitGroup
		var ok, bad atomic.Int64
		for w := range n {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
				reqs := []ratelimit.Request{{Policy: policy, Cost: 1}}
				out := make([]ratelimit.Decision, 1)
				for !done.Load() {
					reqs[0].Key = keys[rng.IntN(len(keys))]
					if _, err := d.store.Evaluate(ctx, reqs, out); err != nil {
						bad.Add(1)
					} else {
						ok.Add(1)
					}
				}
			})
		}
		t := time.NewTimer(dur)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		done.Store(true)
		wg.Wait()
		return ok.Load(), bad.Load()
	}
	run(c.warmup)
	cl := &cell{deployment: d.name, conc: n}
	calls0, err := scriptCalls(ctx, d.nodes)
	if err != nil {
		return nil, err
	}
	cpu0 := nodeCPU(d.nodes)
	self0, _ := benchproc.ProcessCPU(os.Getpid())
	start := time.Now()
	cl.decisions, cl.errors = run(c.duration)
	cl.elapsed = time.Since(start)
	self1, _ := benchproc.ProcessCPU(os.Getpid())
	cpu1 := nodeCPU(d.nodes)
	calls1, err := scriptCalls(ctx, d.nodes)
	if err != nil {
		return nil, err
	}
	cl.clientCPU = self1 - self0
	for i := range d.nodes {
		cl.nodeCPU = append(cl.nodeCPU, cpu1[i]-cpu0[i])
		cl.nodeCalls = append(cl.nodeCalls, calls1[i]-calls0[i])
		k, err := dbsize(ctx, d.nodes[i])
		if err != nil {
			return nil, err
		}
		cl.nodeKeys = append(cl.nodeKeys, k)
	}
	return cl, nil
}

// nodeCPU reads each node's user+system CPU time from /proc.
func nodeCPU(nodes []*redistest.Server) []time.Duration {
	out := make([]time.Duration, len(nodes))
	for i, s := range nodes {
		out[i], _ = benchproc.ProcessCPU(s.PID())
	}
	return out
}

// scriptCalls returns, per node, the calls of the script commands (EVAL,
// EVALSHA and their read-only forms) from INFO commandstats.
func scriptCalls(ctx context.Context, nodes []*redistest.Server) ([]int64, error) {
	out := make([]int64, len(nodes))
	for i, s := range nodes {
		v, err := s.Query(ctx, "INFO", "commandstats")
		if err != nil {
			return nil, fmt.Errorf("INFO commandstats on %s: %w", s.Addr(), err)
		}
		text, _ := v.(string)
		for line := range strings.SplitSeq(text, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_eval") {
				continue
			}
			for f := range strings.SplitSeq(rest, ",") {
				if n, ok := strings.CutPrefix(f, "calls="); ok {
					c, err := strconv.ParseInt(n, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("commandstats on %s: %q", s.Addr(), line)
					}
					out[i] += c
				}
			}
		}
	}
	return out, nil
}

func dbsize(ctx context.Context, s *redistest.Server) (int64, error) {
	v, err := s.Query(ctx, "DBSIZE")
	if err != nil {
		return 0, fmt.Errorf("DBSIZE on %s: %w", s.Addr(), err)
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("DBSIZE on %s: unexpected reply %v", s.Addr(), v)
	}
	return n, nil
}

// report is the run's result.
type report struct {
	cfg        *config
	started    time.Time
	cpus       int
	loadBefore string
	loadAfter  string
	cells      []*cell
}

func (r *report) failed() bool {
	return slices.ContainsFunc(r.cells, func(c *cell) bool { return c.errors > 0 || c.decisions == 0 })
}

// median returns the cell of dep at conc with the median rate, and the range.
func (r *report) median(dep string, conc int) (*cell, float64, float64) {
	var cs []*cell
	for _, c := range r.cells {
		if c.deployment == dep && c.conc == conc {
			cs = append(cs, c)
		}
	}
	if len(cs) == 0 {
		return nil, 0, 0
	}
	slices.SortFunc(cs, func(a, b *cell) int {
		switch {
		case a.rate() < b.rate():
			return -1
		case a.rate() > b.rate():
			return 1
		}
		return 0
	})
	return cs[len(cs)/2], cs[0].rate(), cs[len(cs)-1].rate()
}

func (r *report) markdown() string {
	var b strings.Builder
	c := r.cfg
	fmt.Fprintf(&b, "## clusterbench %s\n\n", r.started.Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "%d CPUs, Go %s, load average %s before, %s after. %d keys, token bucket, %s per cell after %s warm-up, %d rounds (median round shown, range in brackets).\n\n",
		r.cpus, runtime.Version(), r.loadBefore, r.loadAfter, c.keys, c.duration, c.warmup, c.repeat)
	var deps []string
	for _, cl := range r.cells {
		if !slices.Contains(deps, cl.deployment) {
			deps = append(deps, cl.deployment)
		}
	}
	b.WriteString("| deployment | conc | decisions/s (range) | decisions/script call | Redis CPU µs/decision | client CPU µs/decision | errors |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, dep := range deps {
		for _, n := range c.conc {
			m, lo, hi := r.median(dep, n)
			if m == nil {
				continue
			}
			var calls int64
			for _, x := range m.nodeCalls {
				calls += x
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f (%.0f–%.0f) | %.1f | %.1f | %.1f | %d |\n", dep, n, m.rate(), lo, hi,
				ratio(m.decisions, calls), perDecision(m.redisCPU(), m.decisions), perDecision(m.clientCPU, m.decisions), m.errors)
		}
	}
	b.WriteString("\nSpread over the cluster's masters (median round): each master's share of the script calls and of the keys, and its CPU per call it served.\n\n")
	b.WriteString("| deployment | conc | master | script calls | share | keys | share | CPU µs/call |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, dep := range deps {
		for _, n := range c.conc {
			m, _, _ := r.median(dep, n)
			if m == nil || len(m.nodeCalls) < 2 {
				continue
			}
			var calls, keys int64
			for i := range m.nodeCalls {
				calls += m.nodeCalls[i]
				keys += m.nodeKeys[i]
			}
			for i := range m.nodeCalls {
				fmt.Fprintf(&b, "| %s | %d | %d | %d | %.1f%% | %d | %.1f%% | %.1f |\n", dep, n, i+1,
					m.nodeCalls[i], pct(m.nodeCalls[i], calls), m.nodeKeys[i], pct(m.nodeKeys[i], keys),
					perDecision(m.nodeCPU[i], m.nodeCalls[i]))
			}
		}
	}
	return b.String()
}

func perDecision(d time.Duration, n int64) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}

func ratio(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func pct(a, total int64) float64 {
	if total == 0 {
		return 0
	}
	return 100 * float64(a) / float64(total)
}
