package ratelimit_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
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
	clock := kit.NewManualClock(start)
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
	clock := kit.NewManualClock(start)
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

// NewPolicy validates a configuration and reports every problem at once;
// each error wraps ErrInvalidPolicy.
func ExampleNewPolicy() {
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Name: "lean", Algorithm: ratelimit.GCRA, Burst: 20, Rate: 10})
	if err != nil {
		panic(err)
	}
	fmt.Println(p, "period", p.Period(), "interval", kit.ParamsOf(p).IntervalMicros, "µs")

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
