package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// diffStepsPerAlgorithm is the number of random (Δt, cost) steps replayed
// per algorithm, spread over several policies and keys.
const diffStepsPerAlgorithm = 10_000

// diffPolicies are the policies of the differential test, per algorithm:
// small and large limits, rates whose interval is and is not a whole
// divisor, windows that are and are not round, the 2^53 extremes.
func diffPolicies() map[string][]ratelimit.PolicyConfig {
	const big = ratelimit.MaxAmount
	return map[string][]ratelimit.PolicyConfig{
		"token_bucket": {
			{Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 3},
			{Algorithm: ratelimit.TokenBucket, Capacity: 1, Rate: 1e6},
			{Algorithm: ratelimit.TokenBucket, Capacity: 1000, Rate: 0.7},
			{Algorithm: ratelimit.TokenBucket, Capacity: big, Rate: 1e6},
		},
		"leaky_bucket": {
			{Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 3},
			{Algorithm: ratelimit.LeakyBucket, Capacity: 7, Rate: 2, Mode: ratelimit.Shape},
			{Algorithm: ratelimit.LeakyBucket, Capacity: 10, Rate: 5, Mode: ratelimit.Shape, MaxDelay: 1300 * time.Millisecond},
			{Algorithm: ratelimit.LeakyBucket, Capacity: big, Rate: 1e6},
		},
		"fixed_window": {
			{Algorithm: ratelimit.FixedWindow, Limit: 10, Window: time.Second},
			{Algorithm: ratelimit.FixedWindow, Limit: 3, Window: 999_983 * time.Microsecond},
			{Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: time.Hour},
			{Algorithm: ratelimit.FixedWindow, Limit: big, Window: time.Millisecond},
		},
		"sliding_log": {
			{Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Second},
			{Algorithm: ratelimit.SlidingLog, Limit: 5, Window: 333_333 * time.Microsecond},
			{Algorithm: ratelimit.SlidingLog, Limit: 50, Window: 10 * time.Second},
			// more entries than one page of the retry walk (256)
			{Algorithm: ratelimit.SlidingLog, Limit: 1000, Window: 2 * time.Second},
		},
		"sliding_window": {
			{Algorithm: ratelimit.SlidingWindow, Limit: 10, Window: time.Second},
			{Algorithm: ratelimit.SlidingWindow, Limit: 7, Window: 999_983 * time.Microsecond},
			{Algorithm: ratelimit.SlidingWindow, Limit: 100, Window: time.Minute},
			{Algorithm: ratelimit.SlidingWindow, Limit: big, Window: time.Second},
		},
		"gcra": {
			{Algorithm: ratelimit.GCRA, Burst: 10, Rate: 3},
			{Algorithm: ratelimit.GCRA, Burst: 1, Rate: 1e6},
			{Algorithm: ratelimit.GCRA, Burst: 1000, Rate: 0.7},
			{Algorithm: ratelimit.GCRA, Burst: 1 << 40, Rate: 1e6},
		},
	}
}

// TestDifferential replays random (Δt, cost) sequences with an explicit
// time on the Go step functions (kit.StepAt, kit.PeekAt) and on
// Redis: every decision (allowed, remaining, reset, retry-after, delay)
// must be identical. docs/reliability.md row A8.
func TestDifferential(t *testing.T) {
	c := standaloneRedis(t)
	seed := uint64(time.Now().UnixNano())
	const keysPerPolicy = 6
	for alg, cfgs := range diffPolicies() {
		t.Run(alg, func(t *testing.T) {
			t.Parallel()
			steps := (diffStepsPerAlgorithm + len(cfgs)*keysPerPolicy - 1) / (len(cfgs) * keysPerPolicy) // at least 10^4 in all
			var wg sync.WaitGroup
			errs := make(chan error, len(cfgs)*keysPerPolicy)
			for pi, cfg := range cfgs {
				cfg.Name = fmt.Sprintf("%s-%d", alg, pi)
				p := ratelimit.MustPolicy(cfg)
				for k := range keysPerPolicy {
					rng := rand.New(rand.NewPCG(seed, uint64(pi*100+k)))
					clock := kit.NewManualClock(time.Unix(1_764_000_000, 0).Add(time.Duration(rng.Int64N(1e15))))
					s := newTestStore(t, c, clock)
					wg.Go(func() {
						if err := replay(s, clock, p, rng, steps); err != nil {
							errs <- fmt.Errorf("%v, key %d (seed %d): %w", p, k, seed, err)
						}
					})
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// replay runs steps random steps on one key of p, on the Go step function
// and on s, and reports the first difference.
func replay(s *Store, clock *kit.ManualClock, p *ratelimit.Policy, rng *rand.Rand, steps int) error {
	ctx := context.Background()
	// Keep now far below 2^53 µs (the year 2255): Δt is bounded by 10^12µs.
	period := min(max(p.Period().Microseconds(), 1), 1e12)
	unit := max(period/p.Max(), 1)
	var state kit.State
	req := []ratelimit.Request{{Key: "k", Policy: p}}
	got := make([]ratelimit.Decision, 1)
	for step := range steps {
		var dt int64
		switch rng.IntN(5) {
		case 0: // same microsecond
		case 1:
			dt = rng.Int64N(unit + 1)
		case 2:
			dt = rng.Int64N(3*unit + 1)
		case 3:
			dt = rng.Int64N(period + 1)
		case 4:
			dt = rng.Int64N(2*period + 2)
		}
		clock.Advance(time.Duration(dt) * time.Microsecond)
		now := clock.Now().UnixMicro()
		cost := int64(1)
		if rng.IntN(3) == 0 {
			cost = 1 + rng.Int64N(min(p.Max(), 2*max(1, min(p.Max(), 1000))/2))
		}
		req[0].Cost = cost
		call := fmt.Sprintf("step %d at now=%d, cost %d", step, now, cost)
		if rng.IntN(8) == 0 {
			want := kit.PeekAt(p, state, now, cost)
			if err := s.Peek(ctx, req, got); err != nil {
				return fmt.Errorf("%s: Peek: %w", call, err)
			}
			if got[0] != want {
				return fmt.Errorf("%s: Peek = %+v, want %+v", call, got[0], want)
			}
			continue
		}
		next, want := stepCopy(p, state, now, cost)
		if want.Allowed {
			state = next
		}
		ok, err := s.Evaluate(ctx, req, got)
		if err != nil {
			return fmt.Errorf("%s: Evaluate: %w", call, err)
		}
		if ok != want.Allowed || got[0] != want {
			return fmt.Errorf("%s: Evaluate = %v %+v, want %+v", call, ok, got[0], want)
		}
	}
	return nil
}

// TestSlidingLogLongWalk: a denial whose retry-after needs more of the
// oldest entries than one page of the script's walk (256) agrees with the
// Go step function.
func TestSlidingLogLongWalk(t *testing.T) {
	c := standaloneRedis(t)
	clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
	s := newTestStore(t, c, clock)
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 600, Window: time.Hour})
	var state kit.State
	step := func(cost int64) ratelimit.Decision {
		t.Helper()
		next, want := stepCopy(p, state, clock.Now().UnixMicro(), cost)
		if want.Allowed {
			state = next
		}
		_, got := evaluate(t, s, ratelimit.Request{Key: "k", Policy: p, Cost: cost})
		if got[0] != want {
			t.Fatalf("Evaluate(cost %d) = %+v, want %+v", cost, got[0], want)
		}
		return got[0]
	}
	for range 500 {
		step(1)
		clock.Advance(time.Second)
	}
	if d := step(400); d.Allowed || d.RetryAfter < 299*time.Second {
		t.Fatalf("cost 400 after 500 entries = %+v, want denied until 300 entries expire", d)
	}
}

// stepCopy runs kit.StepAt on a copy of s and returns the new state and the
// decision, leaving s as it was.
func stepCopy(p *ratelimit.Policy, s kit.State, nowMicros, n int64) (kit.State, ratelimit.Decision) {
	var d ratelimit.Decision
	kit.StepAt(p, &s, nowMicros, n, &d)
	return s, d
}
