package redis

import (
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// TestSlidingWindowLargeLimitRetry: a sliding-window denial with a large
// limit, where the float estimate absorbs the previous window's small
// weight, computes its retry-after in a few steps, not by walking the window
// µs by µs (about 4·10^5 steps at L=2^40, 10^9 at L=2^52 with a one-hour
// window) inside Redis. Each decision must come back
// within the store's 1s Timeout and equal the Go step function's. It runs
// on a server of its own, so that a regression cannot leave a long script
// blocking the shared one.
func TestSlidingWindowLargeLimitRetry(t *testing.T) {
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0).Truncate(time.Hour))
	s := mustNew(t, Options{Addrs: []string{srv.Addr()}, Clock: clock, Timeout: time.Second})
	for _, l := range []int64{1 << 40, 1 << 50, 1 << 52} {
		p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: l, Window: time.Hour})
		var state kit.State
		key := p.String()
		step := func(cost int64) ratelimit.Decision {
			t.Helper()
			next, want := stepCopy(p, state, clock.Now().UnixMicro(), cost)
			if want.Allowed {
				state = next
			}
			start := time.Now()
			_, got := evaluate(t, s, ratelimit.Request{Key: key, Policy: p, Cost: cost})
			if got[0] != want {
				t.Fatalf("%v: Evaluate(cost %d) = %+v, want %+v", p, cost, got[0], want)
			}
			if d := time.Since(start); d > 500*time.Millisecond {
				t.Errorf("%v: Evaluate(cost %d) took %v", p, cost, d)
			}
			return got[0]
		}
		step(1) // prev = 1 in the next window
		clock.Advance(time.Hour + 5*time.Microsecond)
		step(l - 1)
		for _, cost := range []int64{1, 2, l} {
			if d := step(cost); d.Allowed || d.RetryAfter <= 0 {
				t.Errorf("%v: cost %d with %d of %d taken = %+v, want denied with a retry", p, cost, l-1, l, d)
			}
		}
		clock.Advance(3 * time.Hour)
	}
}
