package localdeny

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// propertyPolicies are one policy of each algorithm and mode, with
// parameters that the random timelines below cross often: units every
// 100ms, windows of a second.
var propertyPolicies = []*ratelimit.Policy{
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 10}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "gcra", Algorithm: ratelimit.GCRA, Burst: 5, Rate: 10}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "police", Algorithm: ratelimit.LeakyBucket, Capacity: 5, Rate: 10}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "shape", Algorithm: ratelimit.LeakyBucket, Capacity: 5, Rate: 10, Mode: ratelimit.Shape}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "shape-md", Algorithm: ratelimit.LeakyBucket, Capacity: 6, Rate: 10, Mode: ratelimit.Shape, MaxDelay: 250 * time.Millisecond}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Second}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 5, Window: time.Second}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sw", Algorithm: ratelimit.SlidingWindow, Limit: 5, Window: time.Second}),
	ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sw-odd", Algorithm: ratelimit.SlidingWindow, Limit: 7, Window: 1234567 * time.Microsecond}),
}

// TestNeverAdmitsMoreNorDeniesLonger runs random timelines of requests
// (several limits, costs, shadow limits, repeated keys, resets, clock steps
// down to the microsecond) through a Store over the memory store, for every
// algorithm, and checks each request answered locally against the store's
// own state at that instant: the store denies every limit answered denied,
// for the same cost, with a RetryAfter no shorter than the local one. So a
// local answer never admits, and never denies past the time the store would
// admit.
func TestNeverAdmitsMoreNorDeniesLonger(t *testing.T) {
	for pi, p := range propertyPolicies {
		t.Run(p.Name(), func(t *testing.T) {
			var local, total int
			for seed := range uint64(40) {
				l, n := propertyRun(t, rand.New(rand.NewPCG(seed, uint64(pi))), p)
				local, total = local+l, total+n
			}
			// The timelines are built to deny often: a test that never
			// answers locally would check nothing.
			if local < total/10 {
				t.Errorf("%d of %d requests answered locally; the timelines check too little", local, total)
			}
		})
	}
}

// propertyRun runs one timeline on p (and, as a second limit, on the token
// bucket) and returns how many requests were answered locally, of how many.
func propertyRun(t *testing.T, r *rand.Rand, p *ratelimit.Policy) (local, total int) {
	e := newEnv(t, Options{})
	ctx := context.Background()
	other := propertyPolicies[0]
	keyOf := func(k int, q *ratelimit.Policy) string { return fmt.Sprintf("k%d/%s", k, q.Name()) }
	out := make([]ratelimit.Decision, 3)
	for step := range 400 {
		switch x := r.IntN(100); {
		case x < 30:
			e.clock.Advance(time.Duration(r.Int64N(int64(150 * time.Millisecond))).Truncate(time.Microsecond))
		case x < 32:
			k := r.IntN(3)
			if err := e.s.Reset(ctx, []ratelimit.Request{{Key: keyOf(k, p), Policy: p}}); err != nil {
				t.Fatal(err)
			}
		}
		n := 1 + r.IntN(3)
		reqs := make([]ratelimit.Request, n)
		for i := range reqs {
			q := p
			if i > 0 && r.IntN(3) == 0 {
				q = other
			}
			reqs[i] = ratelimit.Request{Key: keyOf(r.IntN(3), q), Policy: q, Cost: 1 + r.Int64N(q.Max()), Shadow: r.IntN(8) == 0}
		}
		before := e.local.Load()
		if _, err := e.s.Evaluate(ctx, reqs, out); err != nil {
			t.Fatal(err)
		}
		total++
		if e.local.Load() == before {
			continue
		}
		local++
		denied := false
		for i, q := range reqs {
			d := out[i]
			if d.Uncounted {
				if !d.Allowed {
					t.Fatalf("step %d: limit %d answered Uncounted and denied: %+v", step, i, d)
				}
				continue
			}
			if q.Shadow || d.Allowed {
				t.Fatalf("step %d: limit %d (shadow %v) answered counted and allowed locally: %+v", step, i, q.Shadow, d)
			}
			denied = true
			var peek [1]ratelimit.Decision
			if err := e.mem.Peek(ctx, []ratelimit.Request{q}, peek[:]); err != nil {
				t.Fatal(err)
			}
			if peek[0].Allowed {
				t.Fatalf("step %d: %s cost %d answered denied locally (%+v), the store would admit it", step, q.Key, kit.Cost(q), d)
			}
			if d.RetryAfter <= 0 || d.RetryAfter > peek[0].RetryAfter {
				t.Fatalf("step %d: %s cost %d: local RetryAfter %v, the store's %v", step, q.Key, kit.Cost(q), d.RetryAfter, peek[0].RetryAfter)
			}
		}
		if !denied {
			t.Fatalf("step %d: answered locally with no limit denied: %+v", step, out[:n])
		}
	}
	return local, total
}
