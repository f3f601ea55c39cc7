package kit_test

import (
	"fmt"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// start is a fixed Unix time for the examples.
var start = time.Unix(1_764_000_000, 0)

func verdict(d ratelimit.Decision) string {
	if d.Allowed {
		return "allowed"
	}
	return "denied "
}

// StepAt is one decision of an algorithm as a pure function of the state,
// the time in µs and the cost. Stores call it under a lock (the Redis scripts
// follow the same steps); a denial leaves the state as it was.
func ExampleStepAt() {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: 4, Window: time.Second})
	now := start.UnixMicro() // a multiple of the window
	var (
		s kit.State
		d ratelimit.Decision
	)
	for _, r := range []struct {
		at   time.Duration
		cost int64
	}{{0, 2}, {500 * time.Millisecond, 2}, {750 * time.Millisecond, 1}, {1250 * time.Millisecond, 1}} {
		kit.StepAt(p, &s, now+r.at.Microseconds(), r.cost, &d)
		fmt.Printf("t0+%-6v cost %d: %s remaining=%d reset=%v retry-after=%v\n", r.at, r.cost, verdict(d), d.Remaining, d.Reset, d.RetryAfter)
	}
	// Output:
	// t0+0s     cost 2: allowed remaining=2 reset=2s retry-after=0s
	// t0+500ms  cost 2: allowed remaining=0 reset=1.5s retry-after=0s
	// t0+750ms  cost 1: denied  remaining=0 reset=1.25s retry-after=500ms
	// t0+1.25s  cost 1: allowed remaining=0 reset=1.75s retry-after=0s
}

// In shape mode a leaky bucket admits what police mode admits but holds each
// request until the ones ahead have left, so the upstream sees an even rate.
// A hold longer than MaxDelay is a denial.
func ExampleStepAt_shape() {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{
		Algorithm: ratelimit.LeakyBucket, Capacity: 4, Rate: 2, Mode: ratelimit.Shape, MaxDelay: time.Second,
	})
	now := start.UnixMicro()
	var (
		s kit.State
		d ratelimit.Decision
	)
	for i := range 4 {
		kit.StepAt(p, &s, now, 1, &d)
		fmt.Printf("request %d: %s delay=%v retry-after=%v\n", i+1, verdict(d), d.Delay, d.RetryAfter)
	}
	// Output:
	// request 1: allowed delay=0s retry-after=0s
	// request 2: allowed delay=500ms retry-after=0s
	// request 3: allowed delay=1s retry-after=0s
	// request 4: denied  delay=0s retry-after=500ms
}

// PeekAt tells what a request would get without making it: Remaining and
// Reset describe the state as it is, nothing consumed.
func ExamplePeekAt() {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 10, Window: time.Minute})
	now := start.UnixMicro()
	show := func(d ratelimit.Decision) {
		fmt.Printf("allowed %v, remaining %d of %d, reset %v, retry after %v\n", d.Allowed, d.Remaining, d.Limit, d.Reset, d.RetryAfter)
	}
	var (
		s kit.State
		d ratelimit.Decision
	)
	show(kit.PeekAt(p, s, now, 1))
	kit.StepAt(p, &s, now, 7, &d)
	show(kit.PeekAt(p, s, now+15_000_000, 5))
	// Output:
	// allowed true, remaining 10 of 10, reset 0s, retry after 0s
	// allowed false, remaining 3 of 10, reset 45s, retry after 45s
}
