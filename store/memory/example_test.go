package memory_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// A per-user limit of 2 requests a second, checked on a manual clock.
func Example() {
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	store, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	policy := ratelimit.MustPolicy(ratelimit.PolicyConfig{
		Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 2, Rate: 2,
	})
	limiter, err := ratelimit.NewLimiter(policy, store)
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		d, _ := limiter.Allow(ctx, "alice")
		fmt.Printf("allowed=%v remaining=%d retry-after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	clock.Advance(500 * time.Millisecond)
	d, _ := limiter.Allow(ctx, "alice")
	fmt.Printf("500ms later: allowed=%v remaining=%d\n", d.Allowed, d.Remaining)
	// Output:
	// allowed=true remaining=1 retry-after=0s
	// allowed=true remaining=0 retry-after=0s
	// allowed=false remaining=0 retry-after=500ms
	// 500ms later: allowed=true remaining=0
}

// Several limits decided together: the request is admitted only if every
// limit admits, and then every limit consumes.
func ExampleStore_Evaluate() {
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	store, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	perUser := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Minute})
	global := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "global", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Minute})
	reqs := []ratelimit.Request{
		{Key: "per-user/alice", Policy: perUser},
		{Key: "global", Policy: global},
	}
	out := make([]ratelimit.Decision, len(reqs))
	for range 2 {
		admitted, err := store.Evaluate(context.Background(), reqs, out)
		if err != nil {
			panic(err)
		}
		fmt.Printf("admitted=%v per-user remaining=%d global remaining=%d\n", admitted, out[0].Remaining, out[1].Remaining)
	}
	// Output:
	// admitted=true per-user remaining=4 global remaining=0
	// admitted=false per-user remaining=4 global remaining=0
}
