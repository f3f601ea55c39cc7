// Rlsbench measures Envoy's rate limit service (gRPC
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit) as sluice
// serves it and as envoyproxy/ratelimit serves it, both on one redis-server
// the harness starts on a free loopback port, with one envoyproxy/ratelimit
// configuration file that both read as it is. For each concurrency it drives
// ShouldRateLimit calls from that many client goroutines and measures
// decisions per second, the latency's p50 and p99, and the CPU time per
// decision of each server process and of Redis (/proc/PID/stat), and the
// Redis commands each decision costs (INFO commandstats), in interleaved
// rounds; the report shows medians, ranges and the ratios sluice/peer. Before the load it checks that each server admits exactly K
// of K+M sequential calls on a key limited to K per minute. It writes a
// Markdown report.
//
// Usage:
//
//	cd bench && go run ./cmd/rlsbench -ratelimit-bin PATH [-ratelimit-commit REV] [-conc 1,16,64]
//	    [-duration 3s] [-repeat 3] [-keys 10000] [-sluice-bin PATH] [-out FILE] [-quick]
//
// Without -ratelimit-bin only sluice is measured. Every process listens on
// 127.0.0.1 only and is stopped by its PID; the load is bounded by
// -duration per cell.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
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
	conc             []int
	keys             int
	repeat           int
	checkLimit       int // K: the limit of the correctness check
	checkOver        int // M: calls beyond K
	ratelimitBin     string
	ratelimitCommit  string
	sluiceBin        string
	redisServer      string
	out              string
	cmdline          string
}

// parseFlags parses args; -quick replaces the grid with one short cell.
func parseFlags(args []string, stderr io.Writer) (*config, error) {
	fs := flag.NewFlagSet("rlsbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := &config{}
	var conc string
	var quick bool
	fs.DurationVar(&c.duration, "duration", 3*time.Second, "measured time per cell")
	fs.DurationVar(&c.warmup, "warmup", 300*time.Millisecond, "unmeasured time before each cell")
	fs.StringVar(&conc, "conc", "1,16,64", "comma-separated concurrencies (client goroutines)")
	fs.IntVar(&c.keys, "keys", 10000, "distinct user values the calls spread over")
	fs.IntVar(&c.repeat, "repeat", 1, "rounds; each round runs every cell, servers in alternating order")
	fs.IntVar(&c.checkLimit, "check-limit", 5, "K: the per-minute limit of the correctness check")
	fs.IntVar(&c.checkOver, "check-over", 3, "M: sequential calls beyond K in the correctness check")
	fs.StringVar(&c.ratelimitBin, "ratelimit-bin", "", "envoyproxy/ratelimit binary (go build ./src/service_cmd); empty measures sluice only")
	fs.StringVar(&c.ratelimitCommit, "ratelimit-commit", "", "envoyproxy/ratelimit commit, recorded in the report when the binary's build information has none")
	fs.StringVar(&c.sluiceBin, "sluice-bin", "", "sluice binary; empty builds ./gateway/cmd/sluice of this repository")
	fs.StringVar(&c.redisServer, "redis-server", "redis-server", "redis-server binary")
	fs.StringVar(&c.out, "out", "", "write the Markdown report to this file too (default: stdout only)")
	fs.BoolVar(&quick, "quick", false, "smoke run: one 300ms cell at concurrency 4, one round")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if quick {
		c.duration, c.warmup, conc, c.repeat = 300*time.Millisecond, 100*time.Millisecond, "4", 1
	}
	var err error
	if c.conc, err = benchproc.ParseInts("-conc", conc); err != nil {
		return nil, err
	}
	switch {
	case c.duration <= 0 || c.warmup < 0:
		return nil, fmt.Errorf("-duration must be positive and -warmup not negative, got %v and %v", c.duration, c.warmup)
	case c.duration > 5*time.Minute:
		return nil, fmt.Errorf("-duration %v: at most 5m per cell", c.duration)
	case c.repeat < 1 || c.repeat > 20:
		return nil, fmt.Errorf("-repeat %d: want 1 to 20", c.repeat)
	case c.keys < 1:
		return nil, fmt.Errorf("-keys %d: want at least 1", c.keys)
	case c.checkLimit < 1 || c.checkOver < 1:
		return nil, fmt.Errorf("-check-limit and -check-over must be at least 1")
	}
	for _, n := range c.conc {
		if n > 1024 {
			return nil, fmt.Errorf("-conc %d: at most 1024", n)
		}
	}
	c.cmdline = "cd bench && go run ./cmd/rlsbench " + strings.Join(args, " ")
	return c, nil
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "rlsbench:", err)
		return 2
	}
	rep, err := bench(ctx, c, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "rlsbench:", err)
		return 1
	}
	if err := benchproc.WriteReport(stdout, rep.markdown(), c.out); err != nil {
		fmt.Fprintln(stderr, "rlsbench:", err)
		return 1
	}
	if msg := rep.failures(); msg != "" {
		fmt.Fprintln(stderr, "rlsbench:", msg)
		return 1
	}
	return 0
}
