package redis

import (
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// TestSlidingNext: with nothing left, Redis reports Decision.Next (the
// RateLimit field's t) as the time until one more unit is available, as the
// memory store does, not when the whole limit is back. Limit 5 per hour,
// one request every 100s from 1415s into a window: after the fifth (at
// +1815s) sliding_window has room for one unit after 2505s (the next window
// starts in 1785s, and 720s into it the weight 5·(1−720/3600) = 4 leaves
// room for one) where its Reset is 5385s, and sliding_log frees one when the
// entry of +1415s leaves, 3200s later, where its Reset is 3600s. Both limits
// are in one request, so the scripts' many-limit path runs too.
func TestSlidingNext(t *testing.T) {
	sw := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sw", Algorithm: ratelimit.SlidingWindow, Limit: 5, Window: time.Hour})
	sl := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Hour})
	start := time.Unix(1_764_000_000, 0).Truncate(time.Hour).Add(time.Hour + 1415*time.Second)
	want := []ratelimit.Decision{
		{Allowed: true, Limit: 5, Reset: 5385 * time.Second, Next: 2505 * time.Second},
		{Allowed: true, Limit: 5, Reset: 3600 * time.Second, Next: 3200 * time.Second},
	}
	for _, dep := range deployments {
		for _, batched := range []bool{false, true} {
			if batched && dep.name != "standalone" {
				continue
			}
			name := dep.name
			if batched {
				name += "/batched"
			}
			t.Run(name, func(t *testing.T) {
				clock := kit.NewManualClock(start)
				s := newTestStore(t, dep.client(t), clock)
				if batched {
					setBatching(s, 1, true)
				}
				mem, err := memory.New(memory.Options{Clock: clock})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { mem.Close() })
				reqs := []ratelimit.Request{{Key: "w", Policy: sw, Cost: 1}, {Key: "l", Policy: sl, Cost: 1}}
				var got, onMem []ratelimit.Decision
				for i := range 5 {
					clock.Set(start.Add(time.Duration(i) * 100 * time.Second))
					var ok bool
					if ok, got = evaluate(t, s, reqs...); !ok {
						t.Fatalf("request %d denied on Redis: %+v", i, got)
					}
					_, onMem = evaluate(t, mem, reqs...)
				}
				for i := range want {
					if got[i] != want[i] || onMem[i] != want[i] {
						t.Errorf("%s after the fifth request: Redis %+v, memory %+v; want %+v", reqs[i].Policy.Name(), got[i], onMem[i], want[i])
					}
				}
				// One unit is admitted exactly Next later, not 1µs earlier.
				last := clock.Now()
				for i, r := range reqs {
					clock.Set(last.Add(want[i].Next - time.Microsecond))
					if _, d := evaluate(t, s, r); d[0].Allowed {
						t.Errorf("%s: admitted 1µs before Next", r.Policy.Name())
					}
					clock.Set(last.Add(want[i].Next))
					if _, d := evaluate(t, s, r); !d[0].Allowed {
						t.Errorf("%s: denied at Next: %+v", r.Policy.Name(), d[0])
					}
				}
			})
		}
	}
}
