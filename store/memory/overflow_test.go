package memory

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// TestOnOverflow checks that Options.OnOverflow hears of every limit
// decided against an overflow budget, from single and multi-limit calls,
// and of nothing else, and that it may call the store (no lock is held).
func TestOnOverflow(t *testing.T) {
	var heard, calls atomic.Int64
	var s *Store
	s = newTestStore(t, Options{Clock: kit.NewManualClock(t0), Shards: 1, MaxKeys: 4, OnOverflow: func(n int) {
		heard.Add(int64(n))
		calls.Add(1)
		_ = s.Stats() // locks every shard: deadlocks if a lock is held
	}})
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "p", Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 1})
	q := mustPolicy(t, ratelimit.PolicyConfig{Name: "q", Algorithm: ratelimit.FixedWindow, Limit: 100, Window: 60e9})
	for i := range 4 {
		evaluate(t, s, ratelimit.Request{Key: fmt.Sprint("k", i), Policy: p})
	}
	if heard.Load() != 0 || s.Stats().OverflowHits != 0 {
		t.Fatalf("within the cap: heard %d, OverflowHits %d; want 0 and 0", heard.Load(), s.Stats().OverflowHits)
	}
	evaluate(t, s, ratelimit.Request{Key: "new1", Policy: p})
	// Two untracked keys and a tracked one in one call: two overflows, one call.
	evaluate(t, s, ratelimit.Request{Key: "new2", Policy: p}, ratelimit.Request{Key: "new3", Policy: q}, ratelimit.Request{Key: "k0", Policy: q})
	if got := s.Stats().OverflowHits; heard.Load() != 3 || got != 3 || calls.Load() != 2 {
		t.Errorf("heard %d in %d calls, OverflowHits %d; want 3 in 2 calls, and 3", heard.Load(), calls.Load(), got)
	}
}
