package redis

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// noRefillPolicies returns one policy per algorithm with limit c that
// cannot refill or roll over during a test: the slowest rate (one unit per
// 10^6 s) and windows of 366 days.
func noRefillPolicies(c int64) []*ratelimit.Policy {
	const w = ratelimit.MaxWindow
	cfgs := []ratelimit.PolicyConfig{
		{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: c, Rate: ratelimit.MinRate},
		{Name: "lb", Algorithm: ratelimit.LeakyBucket, Capacity: c, Rate: ratelimit.MinRate},
		{Name: "lbs", Algorithm: ratelimit.LeakyBucket, Capacity: c, Rate: ratelimit.MinRate, Mode: ratelimit.Shape},
		{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: c, Window: w},
		{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: c, Window: w},
		{Name: "sw", Algorithm: ratelimit.SlidingWindow, Limit: c, Window: w},
		{Name: "gc", Algorithm: ratelimit.GCRA, Burst: c, Rate: ratelimit.MinRate},
	}
	ps := make([]*ratelimit.Policy, len(cfgs))
	for i, cfg := range cfgs {
		ps[i] = ratelimit.MustPolicy(cfg)
	}
	return ps
}

// The sizes of the exactness tests (TestConcurrentExact and
// TestBatchConcurrentExact): clients × goroutines each deciding perG
// requests on one key of capacity concCapacity.
const (
	concClients    = 4
	concGoroutines = 64
	concPerG       = 3
	concCapacity   = 100
)

// hammerOneKey has concGoroutines goroutines per store each decide concPerG
// requests of p on key at once, and checks that exactly concCapacity are
// admitted, each admission reporting its own remaining. It returns the
// number of decisions made.
func hammerOneKey(t *testing.T, stores []*Store, p *ratelimit.Policy, key string) int {
	t.Helper()
	var admitted atomic.Int64
	var seen [concCapacity]atomic.Int32
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*concGoroutines)
	for _, s := range stores {
		for range concGoroutines {
			wg.Go(func() {
				out := make([]ratelimit.Decision, 1)
				req := []ratelimit.Request{{Key: key, Policy: p}}
				for range concPerG {
					ok, err := s.Evaluate(context.Background(), req, out)
					if err != nil {
						errs <- err
						return
					}
					if ok {
						admitted.Add(1)
						if r := out[0].Remaining; r >= 0 && r < concCapacity {
							seen[r].Add(1)
						}
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := admitted.Load(); got != concCapacity {
		t.Errorf("%d clients × %d goroutines × %d requests admitted %d, want exactly %d", len(stores), concGoroutines, concPerG, got, concCapacity)
	}
	for r := range seen {
		if n := seen[r].Load(); n != 1 {
			t.Errorf("remaining %d reported by %d admissions, want 1", r, n)
		}
	}
	return len(stores) * concGoroutines * concPerG
}

// TestConcurrentExact: 4 separate clients × 64 goroutines hammer one key
// with Redis TIME; exactly the capacity is admitted, for every algorithm,
// on standalone and on Cluster, and each admission sees its own remaining.
// docs/reliability.md row A3.
func TestConcurrentExact(t *testing.T) {
	for _, dep := range deployments {
		t.Run(dep.name, func(t *testing.T) {
			addrs := dep.addrs(t)
			prefix := testPrefix()
			stores := make([]*Store, concClients)
			for i := range stores {
				s, err := New(Options{Mode: dep.mode, Addrs: addrs, Prefix: prefix, Timeout: 10 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				stores[i] = s
			}
			for _, p := range noRefillPolicies(concCapacity) {
				t.Run(string(p.Name()), func(t *testing.T) {
					key := "hot-" + p.Name()
					hammerOneKey(t, stores, p, key)
					if err := stores[0].Reset(context.Background(), []ratelimit.Request{{Key: key, Policy: p}}); err != nil {
						t.Error(err)
					}
				})
			}
		})
	}
}
