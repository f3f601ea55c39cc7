// Command faultbench runs the load-and-fault scenarios of docs/reliability.md
// against the sluice binary with real redis-server processes on loopback,
// and prints each scenario's figures: 5xx count, p50/p99 before, during and
// after the fault, admissions on the accounting key against its exact
// budget, and the seconds until decisions are back on Redis.
//
// Usage, from the repository root:
//
//	cd bench && go run ./cmd/faultbench                       # every scenario, long version
//	cd bench && go run ./cmd/faultbench -scenario B1,B2 -rate 500 -before 5s -fault 10s -after 10s
//	cd bench && go run ./cmd/faultbench -list
//	cd bench && go run ./cmd/faultbench -assert-latency      # quiet machine: p99 misses fail too
//
// It needs redis-server (7.x) on PATH. Every process it starts listens on
// 127.0.0.1 and is stopped at the end; a run is bounded by its phases.
// The exit status is 1 when a scenario fails a correctness figure (5xx,
// accounting, recovery); latency is reported, with its own verdict, and so
// are the figures CPU contention alone can move (misses: how soon decisions
// came back on Redis, shares of decisions made locally, breaker openings;
// see faultload.Options.Relaxed), which then run relaxed. With
// -assert-latency the run is strict: every miss fails, and so does a row
// whose p99 during or after the fault misses its target: p99 ≤ min(25 ms,
// same-run baseline p99 + 15 ms), or ≤ store.timeout + baseline p99 + 5 ms
// for a hung or slow Redis (B2-B6, B11, B13). That is for a quiet machine:
// on a shared one, CPU contention alone misses it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/internal/faultload"
	"github.com/sluice-gw/sluice/internal/sluicetest"
)

func main() {
	os.Exit(run())
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / 1e6 }

func run() int {
	var (
		scenarios = flag.String("scenario", "all", "comma-separated scenario IDs, or all")
		binary    = flag.String("sluice", "", "sluice binary (default: go build ./gateway/cmd/sluice)")
		rate      = flag.Int("rate", 500, "offered load, requests per second")
		before    = flag.Duration("before", 5*time.Second, "clean load before the fault")
		fault     = flag.Duration("fault", 10*time.Second, "length of the fault")
		after     = flag.Duration("after", 10*time.Second, "load after the fault")
		timeout   = flag.Duration("timeout", 20*time.Millisecond, "store.timeout")
		list      = flag.Bool("list", false, "list the scenarios and exit")
		assertLat = flag.Bool("assert-latency", false, "strict run: fail a scenario whose p99 during or after the fault, or any other load-sensitive figure, misses its target (quiet machines only)")
		verbose   = flag.Bool("v", false, "print progress")
	)
	flag.Parse()
	if *list {
		for _, sc := range faultload.Scenarios() {
			fmt.Printf("%-10s %s\n", sc.ID, sc.Title)
		}
		return 0
	}
	var chosen []faultload.Scenario
	if *scenarios == "all" {
		chosen = faultload.Scenarios()
	} else {
		for id := range strings.SplitSeq(*scenarios, ",") {
			sc, ok := faultload.Lookup(strings.TrimSpace(id))
			if !ok {
				fmt.Fprintf(os.Stderr, "faultbench: unknown scenario %q (see -list)\n", id)
				return 2
			}
			chosen = append(chosen, sc)
		}
	}
	if *binary == "" {
		dir, err := os.MkdirTemp("", "faultbench-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if *binary, err = sluicetest.Build(dir, false); err != nil {
			fmt.Fprintln(os.Stderr, "faultbench:", err)
			return 1
		}
	}
	opts := faultload.Options{Binary: *binary, Rate: *rate, Before: *before, Fault: *fault, After: *after, Timeout: *timeout,
		Relaxed: !*assertLat}
	if *verbose {
		opts.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	}
	failed := 0
	for _, sc := range chosen {
		r, err := faultload.Run(context.Background(), sc, opts)
		if err != nil {
			fmt.Printf("== %s %s: ERROR %v\n", sc.ID, sc.Title, err)
			failed++
			continue
		}
		if *assertLat && !r.LatencyOK {
			r.Miss("latency (-assert-latency): p99 during %.1fms, after %.1fms, target ≤ %.1fms (baseline p99 %.1fms)",
				ms(r.Phases[1].P99), ms(r.Phases[2].P99), ms(r.LatencyTarget), ms(r.Phases[0].P99))
		}
		r.Print(os.Stdout)
		if !r.Passed() {
			failed++
		}
	}
	what := "the correctness figures (load-sensitive figures reported)"
	if *assertLat {
		what = "the correctness figures, latency and the load-sensitive figures"
	}
	fmt.Printf("%d of %d scenarios passed %s\n", len(chosen)-failed, len(chosen), what)
	if failed > 0 {
		return 1
	}
	return 0
}
