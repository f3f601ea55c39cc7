package redis

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// referenceEvaluate is the all-or-nothing contract on Go step functions, as
// the memory store implements it: limits are decided in order, a limit on a
// key an earlier limit of the request admitted on sees that limit's new
// state; if the request is denied nothing is stored and every admitting
// limit reports kit.PeekAt on the state it saw.
func referenceEvaluate(states map[string]kit.State, reqs []ratelimit.Request, now int64) (bool, []ratelimit.Decision) {
	work := map[string]kit.State{}
	seen := make([]kit.State, len(reqs))
	out := make([]ratelimit.Decision, len(reqs))
	admitted := true
	for i, r := range reqs {
		st, ok := work[r.Key]
		if !ok {
			st = states[r.Key]
		}
		seen[i] = st
		next, d := stepCopy(r.Policy, st, now, kit.Cost(r))
		out[i] = d
		switch {
		case d.Allowed:
			work[r.Key] = next
		case !r.Shadow:
			admitted = false
		}
	}
	if !admitted {
		for i, r := range reqs {
			if out[i].Allowed {
				out[i] = kit.PeekAt(r.Policy, seen[i], now, kit.Cost(r))
			}
		}
		return false, out
	}
	for k, st := range work {
		states[k] = st
	}
	return true, out
}

// TestSameKeyTwice: several limits of one request on the same key (and
// algorithm) add up, exactly as in the reference, including shadow limits
// and denials; random sequences, every algorithm.
func TestSameKeyTwice(t *testing.T) {
	c := standaloneRedis(t)
	seed := uint64(time.Now().UnixNano())
	for _, p := range policies(t) {
		t.Run(p.Name(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
			s := newTestStore(t, c, clock)
			states := map[string]kit.State{}
			for step := range 400 {
				clock.Advance(time.Duration(rng.Int64N(700_000)) * time.Microsecond)
				reqs := make([]ratelimit.Request, 1+rng.IntN(4))
				for i := range reqs {
					reqs[i] = ratelimit.Request{Key: []string{"x", "y"}[rng.IntN(2)], Policy: p,
						Cost: 1 + rng.Int64N(3), Shadow: rng.IntN(4) == 0}
				}
				now := clock.Now().UnixMicro()
				if rng.IntN(5) == 0 {
					got := peek(t, s, reqs...)
					for i, r := range reqs {
						if want := kit.PeekAt(p, states[r.Key], now, kit.Cost(r)); got[i] != want {
							t.Fatalf("step %d (seed %d): Peek %+v: limit %d = %+v, want %+v", step, seed, reqs, i, got[i], want)
						}
					}
					continue
				}
				wantOK, want := referenceEvaluate(states, reqs, now)
				ok, got := evaluate(t, s, reqs...)
				if ok != wantOK || fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("step %d (seed %d) %+v:\n got %v %+v\nwant %v %+v", step, seed, reqs, ok, got, wantOK, want)
				}
			}
		})
	}
}
