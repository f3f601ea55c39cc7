package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/faultload"
	"github.com/sluice-gw/sluice/internal/redistest"
)

// TestFault runs the reliability plan's fault scenarios (RELIABILITY.md
// rows A6, B1-B14, C1+C3, C2, C4, C5, D2-D5; see internal/faultload and
// docs/reliability.md) against the sluice binary with real redis-server
// processes: a fixed request rate, the fault injected mid-run, and every
// scenario's status codes and counters checked: no 5xx, the accounting key
// within its budget, decisions back on Redis in time, and the row's own
// counters. Latency is logged, not asserted (a shared CI box is no place
// for timing assertions; faultbench -assert-latency asserts it on a quiet
// machine), and the figures that only measure spurious breaker openings
// (A6, C4's running gateway) are asserted with relaxed bounds
// (Options.Relaxed); docs/reliability.md has the figures of dedicated runs.
//
// The short version (200 req/s, 2 s + 3 s fault + 3 s, store.timeout 50ms;
// B4 and B5 step through three and two faults of 3 s, C2's fault lasts
// 12 s, C4's 8 s, C5's 6 s; A6 measures 18 s at 500 req/s, its row's R0)
// takes about five minutes. SLUICE_FAULT_LONG=1 runs the plan's
// version (500 req/s, 5 s + 10 s + 10 s, store.timeout 20ms), about fourteen
// minutes.
//
// The subtests run one after another and not in parallel with the package's
// parallel tests (top-level parallel tests wait for sequential ones), so
// each scenario has the machine's CPU to itself.
func TestFault(t *testing.T) {
	if testing.Short() {
		t.Skip("fault scenarios take minutes")
	}
	redistest.Check(t, redistest.Available())
	opts := faultload.Options{Binary: binary, Rate: 200, Before: 2 * time.Second, Fault: 3 * time.Second,
		After: 3 * time.Second, Timeout: 50 * time.Millisecond, Relaxed: true, Logf: t.Logf}
	if os.Getenv("SLUICE_FAULT_LONG") == "1" {
		opts.Rate, opts.Before, opts.Fault, opts.After, opts.Timeout = 500, 5*time.Second, 10*time.Second, 10*time.Second, 20*time.Millisecond
		opts.Relaxed = false
	}
	for _, sc := range faultload.Scenarios() {
		t.Run(sc.ID, func(t *testing.T) {
			o := opts
			o.Logf = t.Logf
			run := func() *faultload.Report {
				r, err := faultload.Run(context.Background(), sc, o)
				if err != nil {
					t.Fatal(err)
				}
				var b strings.Builder
				r.Print(&b)
				t.Logf("\n%s", b.String())
				return r
			}
			r := run()
			if len(r.Failures) > 0 && onlyLoadSensitive(r.Failures) {
				// A timing figure (how soon decisions came back on Redis,
				// what share fell back) can miss on a loaded 2-core box
				// through spurious store timeouts alone. Run the scenario
				// once more; correctness failures are never retried.
				t.Logf("%s: load-sensitive figures missed, running once more: %q", sc.ID, r.Failures)
				r = run()
			}
			for _, f := range r.Failures {
				t.Errorf("%s: %s", sc.ID, f)
			}
		})
	}
}

// hardFailures mark the failures that show a correctness problem: a 5xx, an
// over-admission, a re-sent script, a write to a stale master, a wrong
// on_error answer, a leak. They fail a scenario at once.
var hardFailures = []string{"5xx", "accounting key", "allowed over the run", "re-sent", "stale master",
	"executed", "denials during", "not answered", "leak", "NOSCRIPT", "event ", "NOREPLICAS", "not reported",
	"crash"}

// onlyLoadSensitive reports whether every failure is a timing or share
// figure that CPU contention alone can move.
func onlyLoadSensitive(failures []string) bool {
	for _, f := range failures {
		for _, h := range hardFailures {
			if strings.Contains(f, h) {
				return false
			}
		}
	}
	return true
}
