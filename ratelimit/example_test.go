package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// start is a fixed Unix time for the examples' manual clocks.
var start = time.Unix(1_764_000_000, 0)

func verdict(d ratelimit.Decision) string {
	if d.Allowed {
		return "allowed"
	}
	return "denied "
}

// A Limiter applies one policy to many keys on a Store. Here the store is the
// in-memory one on a manual clock, so time moves only when the example says.
func Example_limiter() {
	clock := ratelimit.NewManualClock(start)
	store, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	// 3 requests at once, then one more every 500ms.
	policy := ratelimit.MustPolicy(ratelimit.PolicyConfig{
		Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 3, Rate: 2,
	})
	limiter, err := ratelimit.NewLimiter(policy, store)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, step := range []time.Duration{0, 0, 0, 0, 200 * time.Millisecond, 300 * time.Millisecond} {
		clock.Advance(step)
		d, err := limiter.Allow(ctx, "alice")
		if err != nil {
			panic(err)
		}
		fmt.Printf("t0+%-5v %s remaining=%d retry-after=%v\n", clock.Now().Sub(start), verdict(d), d.Remaining, d.RetryAfter)
	}
	// Another key has its own budget.
	d, _ := limiter.Allow(ctx, "bob")
	fmt.Println("bob:", verdict(d), "remaining", d.Remaining)
	// Output:
	// t0+0s    allowed remaining=2 retry-after=0s
	// t0+0s    allowed remaining=1 retry-after=0s
	// t0+0s    allowed remaining=0 retry-after=0s
	// t0+0s    denied  remaining=0 retry-after=500ms
	// t0+200ms denied  remaining=0 retry-after=300ms
	// t0+500ms allowed remaining=0 retry-after=0s
	// bob: allowed remaining 2
}

// A Store decides several limits of one request together: the request is
// admitted only if every limit admits, and then each one consumes. A shadow
// limit is evaluated and reported but never denies.
func Example_multipleLimits() {
	clock := ratelimit.NewManualClock(start)
	store, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer store.Close()

	perUser := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	global := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "global", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Second})
	trial := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "trial", Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Minute})
	reqs := []ratelimit.Request{
		{Key: "per-user:alice", Policy: perUser},
		{Key: "global", Policy: global},
		{Key: "trial:alice", Policy: trial, Shadow: true},
	}
	out := make([]ratelimit.Decision, len(reqs))
	for i := range 3 {
		admitted, err := store.Evaluate(context.Background(), reqs, out)
		if err != nil {
			panic(err)
		}
		fmt.Printf("request %d admitted=%-5v", i+1, admitted)
		for j, d := range out {
			fmt.Printf("  %s: %s %d", reqs[j].Policy.Name(), verdict(d), d.Remaining)
		}
		fmt.Println()
	}
	// Output:
	// request 1 admitted=true   per-user: allowed 4  global: allowed 1  trial: allowed 0
	// request 2 admitted=true   per-user: allowed 3  global: allowed 0  trial: denied  0
	// request 3 admitted=false  per-user: allowed 3  global: denied  0  trial: denied  0
}

// StepAt is one decision of an algorithm as a pure function: state, time in
// µs and cost in; new state and decision out. Stores call it under a lock (the
// Redis scripts follow the same steps); nothing is stored on a denial.
func ExampleStepAt() {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingWindow, Limit: 4, Window: time.Second})
	now := ratelimit.UnixMicros(start) // a multiple of the window
	var s ratelimit.State
	for _, r := range []struct {
		at   time.Duration
		cost int64
	}{{0, 2}, {500 * time.Millisecond, 2}, {750 * time.Millisecond, 1}, {1250 * time.Millisecond, 1}} {
		next, d := ratelimit.StepAt(p, s, now+r.at.Microseconds(), r.cost)
		if d.Allowed {
			s = next
		}
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
	now := ratelimit.UnixMicros(start)
	var s ratelimit.State
	for i := range 4 {
		next, d := ratelimit.StepAt(p, s, now, 1)
		if d.Allowed {
			s = next
		}
		fmt.Printf("request %d: %s delay=%v retry-after=%v\n", i+1, verdict(d), d.Delay, d.RetryAfter)
	}
	// Output:
	// request 1: allowed delay=0s retry-after=0s
	// request 2: allowed delay=500ms retry-after=0s
	// request 3: allowed delay=1s retry-after=0s
	// request 4: denied  delay=0s retry-after=500ms
}

// NewPolicy validates a configuration and reports every problem at once;
// each error wraps ErrInvalidPolicy.
func ExampleNewPolicy() {
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Name: "lean", Algorithm: ratelimit.GCRA, Burst: 20, Rate: 10})
	if err != nil {
		panic(err)
	}
	fmt.Println(p, "period", p.Period(), "interval", p.IntervalMicros(), "µs")

	_, err = ratelimit.NewPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Rate: -1, Window: time.Second})
	fmt.Println(errors.Is(err, ratelimit.ErrInvalidPolicy))
	fmt.Println(err)
	// Output:
	// gcra(burst=20, rate=10/s) period 2s interval 100000 µs
	// true
	// invalid policy: capacity must be at least 1, got 0
	// invalid policy: rate must be positive, got -1
	// invalid policy: window does not apply to token_bucket
}

// PeekAt tells what a request would get without making it: Remaining and
// Reset describe the state as it is, nothing consumed.
func ExamplePeekAt() {
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 10, Window: time.Minute})
	now := ratelimit.UnixMicros(start)
	show := func(d ratelimit.Decision) {
		fmt.Printf("allowed %v, remaining %d of %d, reset %v, retry after %v\n", d.Allowed, d.Remaining, d.Limit, d.Reset, d.RetryAfter)
	}
	show(ratelimit.PeekAt(p, ratelimit.State{}, now, 1))
	s, _ := ratelimit.StepAt(p, ratelimit.State{}, now, 7)
	show(ratelimit.PeekAt(p, s, now+15_000_000, 5))
	// Output:
	// allowed true, remaining 10 of 10, reset 0s, retry after 0s
	// allowed false, remaining 3 of 10, reset 45s, retry after 45s
}
