package redis

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

var memDiffSeed = flag.Uint64("redis.diffseed", 0, "seed of TestDifferentialMemory; 0 means one taken from the time")

const (
	// memDiffSequences is the number of random sequences per algorithm (and
	// leaky bucket mode), each on its own key.
	memDiffSequences = 10_000
	// memDiffMaxSteps is the longest sequence; lengths are uniform in 1..8.
	memDiffMaxSteps = 8
	// memDiffWorkers is the number of goroutines per algorithm, each with its
	// own clock, memory store and Redis store, running its share of the
	// sequences one after another.
	memDiffWorkers = 32
)

// memDiffGroups returns the policies of TestDifferentialMemory by group:
// those of TestDifferential, with the leaky bucket's police and shape modes
// in groups of their own, and a few more shapes.
func memDiffGroups() map[string][]ratelimit.PolicyConfig {
	groups := diffPolicies()
	var police, shape []ratelimit.PolicyConfig
	for _, c := range groups["leaky_bucket"] {
		if c.Mode == ratelimit.Shape {
			shape = append(shape, c)
		} else {
			police = append(police, c)
		}
	}
	police = append(police, ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 1000, Rate: 0.7})
	shape = append(shape, ratelimit.PolicyConfig{Algorithm: ratelimit.LeakyBucket, Capacity: 1, Rate: 1e6, Mode: ratelimit.Shape, MaxDelay: time.Microsecond})
	groups["leaky_bucket"] = police
	groups["leaky_bucket_shape"] = shape
	return groups
}

// TestDifferentialMemory: 10^4 random (Δt, cost) sequences per algorithm
// (and leaky bucket mode), replayed with the same explicit time on the
// memory store and on Redis, get identical answers from Evaluate and Peek:
// allowed, limit, remaining, reset, retry-after, delay and next, at every step.
// Rerun a failure with -redis.diffseed=SEED.
func TestDifferentialMemory(t *testing.T) {
	c := standaloneRedis(t)
	seed := *memDiffSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	groups := memDiffGroups()
	names := slices.Sorted(maps.Keys(groups))
	// Every group's workers run at once (7·32 goroutines), so the client's
	// pipeline stays full; each has its own key prefix.
	errs := make([]error, len(names)*memDiffWorkers)
	var wg sync.WaitGroup
	for gi, name := range names {
		ps := make([]*ratelimit.Policy, len(groups[name]))
		for i, cfg := range groups[name] {
			cfg.Name = fmt.Sprintf("%s-%d", name, i)
			ps[i] = ratelimit.MustPolicy(cfg)
		}
		for w := range memDiffWorkers {
			rng := rand.New(rand.NewPCG(seed, uint64(gi*1000+w)))
			clock := kit.NewManualClock(time.Unix(1_764_000_000, 0).Add(time.Duration(rng.Int64N(1e12)) * time.Microsecond))
			ms, err := memory.New(memory.Options{Clock: clock, Shards: 16})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ms.Close() })
			rs := newTestStore(t, c, clock)
			wg.Go(func() {
				for i := w; i < memDiffSequences; i += memDiffWorkers {
					p := ps[i%len(ps)]
					if err := replayOnBoth(ms, rs, clock, p, fmt.Sprintf("seq-%d", i), rng); err != nil {
						errs[gi*memDiffWorkers+w] = fmt.Errorf("%s: %v, sequence %d (seed %d): %w", name, p, i, seed, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// replayOnBoth runs one random sequence of 1..memDiffMaxSteps steps on key
// under p, on the memory store ms and on the Redis store rs, which share
// clock, and reports the first difference with the steps that led to it.
func replayOnBoth(ms *memory.Store, rs *Store, clock *kit.ManualClock, p *ratelimit.Policy, key string, rng *rand.Rand) error {
	ctx := context.Background()
	req := []ratelimit.Request{{Key: key, Policy: p}}
	got := make([]ratelimit.Decision, 1)
	want := make([]ratelimit.Decision, 1)
	type taken struct {
		dt, cost int64
		peek     bool
	}
	var steps [memDiffMaxSteps]taken
	n := 1 + rng.IntN(memDiffMaxSteps)
	// where describes step i and the steps that led to it, for a failure.
	where := func(i int) string {
		var b strings.Builder
		for _, s := range steps[:i+1] {
			op := "Evaluate"
			if s.peek {
				op = "Peek"
			}
			fmt.Fprintf(&b, " +%dµs %s(%d);", s.dt, op, s.cost)
		}
		return fmt.Sprintf("step %d at now=%d (steps:%s)", i, clock.Now().UnixMicro(), b.String())
	}
	for i := range n {
		dt, cost := randomStep(rng, p)
		steps[i] = taken{dt: dt, cost: cost, peek: rng.IntN(8) == 0}
		clock.Advance(time.Duration(dt) * time.Microsecond)
		req[0].Cost = cost
		if steps[i].peek {
			if err := ms.Peek(ctx, req, want); err != nil {
				return fmt.Errorf("%s: memory Peek: %w", where(i), err)
			}
			if err := rs.Peek(ctx, req, got); err != nil {
				return fmt.Errorf("%s: Redis Peek: %w", where(i), err)
			}
			if got[0] != want[0] {
				return fmt.Errorf("%s: Peek on Redis = %+v, on memory %+v", where(i), got[0], want[0])
			}
			continue
		}
		wantOK, err := ms.Evaluate(ctx, req, want)
		if err != nil {
			return fmt.Errorf("%s: memory Evaluate: %w", where(i), err)
		}
		gotOK, err := rs.Evaluate(ctx, req, got)
		if err != nil {
			return fmt.Errorf("%s: Redis Evaluate: %w", where(i), err)
		}
		if gotOK != wantOK || got[0] != want[0] {
			return fmt.Errorf("%s: Evaluate on Redis = %v %+v, on memory %v %+v", where(i), gotOK, got[0], wantOK, want[0])
		}
	}
	return nil
}

// randomStep returns a random Δt in µs (zero, a fraction of one unit's
// interval, a few units, up to one or two periods) and a random cost
// (mostly 1, else up to min(max, 1000)) for p.
func randomStep(rng *rand.Rand, p *ratelimit.Policy) (dt, cost int64) {
	// Bounded by 10^12µs a step, so now stays far below 2^53µs.
	period := min(max(p.Period().Microseconds(), 1), 1e12)
	unit := max(period/p.Max(), 1)
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
	cost = 1
	if rng.IntN(3) == 0 {
		cost = 1 + rng.Int64N(min(p.Max(), 1000))
	}
	return dt, cost
}
