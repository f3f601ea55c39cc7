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

// TestFault runs the fault scenarios of docs/reliability.md (rows A6,
// B1-B14, C1+C3, C2, C4, C5, D1-D5; the harness is internal/faultload)
// against the sluice binary with real redis-server processes: a fixed
// request rate, the fault injected mid-run, and every scenario's status
// codes and counters checked: no 5xx, the accounting key within its
// budget, decisions back on Redis, and the row's own counters. Latency is
// logged, not asserted (a shared CI box is no place for timing assertions;
// faultbench -assert-latency asserts it on a quiet machine).
//
// Each check gives one of two verdicts (see faultload.Options.Relaxed). A
// failure is a correctness problem (a 5xx, over-admission, a re-sent
// script, a write to a stale master, a wrong on_error answer, a leak, a
// failed event, a fallback that never engaged or never ended, a
// misclassified error) and fails the subtest. A miss is a figure that CPU
// contention alone can move (how soon decisions came back on Redis, the
// share of decisions made locally, breaker openings with Redis healthy,
// calls reaching a hung Redis): the short version runs relaxed and logs a
// miss, marked "MISS (load-sensitive, relaxed: not failed)", without
// failing, except where a gross bound still shows a defect (A6: ≤ 2
// breaker openings and < 5% off Redis; B2 ≤ a quarter of the limited
// requests reaching the hung Redis; C4's running gateway ≥ 50% on Redis;
// D5 < 75% off Redis), which fails. SLUICE_FAULT_LONG=1 runs
// strict: every miss fails. No scenario is ever run twice.
//
// The short version (200 req/s, 2 s + 3 s fault + 3 s, store.timeout 50ms;
// B4 and B5 step through three and two faults of 3 s, C2's fault lasts
// 12 s, C4's 8 s, C5's 6 s; A6 measures 18 s at 500 req/s, its row's R0)
// takes about five minutes. SLUICE_FAULT_LONG=1 runs the long
// version of docs/reliability.md (500 req/s, 5 s + 10 s + 10 s, store.timeout 20ms), about fourteen
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
			r, err := faultload.Run(context.Background(), sc, o)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			r.Print(&b)
			t.Logf("\n%s", b.String())
			for _, f := range r.Failures {
				t.Errorf("%s: %s", sc.ID, f)
			}
			for _, m := range r.Misses {
				if r.Relaxed {
					t.Logf("%s: MISS (load-sensitive, relaxed: not failed): %s", sc.ID, m)
				} else {
					t.Errorf("%s: MISS (load-sensitive): %s", sc.ID, m)
				}
			}
		})
	}
}
