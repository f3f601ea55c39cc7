package memory

import (
	"context"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// heapInUse returns the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// cardinality returns how many distinct keys TestDistinctKeysStayWithinCap
// sends and the cap it sets: 10^6 distinct keys (a key-cardinality flood),
// and the cap is a tenth of that. The race detector makes each call several
// times slower, so a -race run scales both down by ten (10^5 keys, cap
// 10^4); SLUICE_E1_FULL=1 keeps the full size under -race too.
func cardinality() (keys, maxKeys int) {
	if raceEnabled && os.Getenv("SLUICE_E1_FULL") != "1" {
		return 100_000, 10_000
	}
	return 1_000_000, 100_000
}

// TestDistinctKeysStayWithinCap checks the key cap (docs/operations.md "The
// key cap") on the store itself: a flood of distinct keys, ten times the cap, keeps the
// number of tracked keys at most the cap and the heap growth at most
// cap × 200 B + 16 MiB; a legitimate hot key interleaved with the flood is
// limited exactly as if it were alone; and once the flood is past its TTL,
// one sweep gives the memory back.
func TestDistinctKeysStayWithinCap(t *testing.T) {
	const (
		hotEvery = 10 // one hot-key request per 10 flood keys
		step     = 100 * time.Microsecond
	)
	distinct, maxKeys := cardinality()
	clock := kit.NewManualClock(t0)
	s := newTestStore(t, Options{Clock: clock, MaxKeys: maxKeys, SweepInterval: time.Hour})
	// Every key, the hot one included, is under the same policy, so the
	// flood also competes with the hot key for the overflow budget.
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 10})

	base := heapInUse()
	hot := []ratelimit.Request{{Key: "legit-hot-key", Policy: p}}
	reqs := []ratelimit.Request{{Policy: p}}
	out := make([]ratelimit.Decision, 1)
	hotAllowed, hotSent := 0, 0
	start := clock.Now()
	for i := range distinct {
		clock.Advance(step)
		reqs[0].Key = "flood-" + strconv.Itoa(i)
		if _, err := s.Evaluate(context.Background(), reqs, out); err != nil {
			t.Fatal(err)
		}
		if i%hotEvery == 0 {
			hotSent++
			ok, err := s.Evaluate(context.Background(), hot, out)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				hotAllowed++
			}
		}
	}
	elapsed := clock.Now().Sub(start)
	peak := heapInUse()
	st := s.Stats()
	if st.Keys > maxKeys {
		t.Errorf("Stats().Keys = %d after %d distinct keys, want ≤ the cap %d", st.Keys, distinct, maxKeys)
	}
	growth := int64(peak) - int64(base)
	bound := int64(maxKeys*200 + 16<<20)
	t.Logf("E1: %d keys sent, %d tracked, %d overflow hits; heap growth %.1f MiB (%.0f B per tracked key), bound %.1f MiB",
		distinct, st.Keys, st.OverflowHits, float64(growth)/(1<<20), float64(growth)/float64(max(st.Keys, 1)), float64(bound)/(1<<20))
	if growth > bound {
		t.Errorf("heap grew by %d B with %d tracked keys, want ≤ %d B (cap × 200 B + 16 MiB)", growth, st.Keys, bound)
	}
	// The hot key was tracked from its first request (the store was empty),
	// so it is decided on its own state: a bucket of 5 refilled at 10/s,
	// asked every millisecond, admits 5 + floor(10/s × elapsed) requests,
	// give or take the last partial token.
	want := 5 + int(10*elapsed.Seconds())
	t.Logf("E1: hot key admitted %d of %d over %v (exact bound %d)", hotAllowed, hotSent, elapsed, want)
	if hotAllowed < want-1 || hotAllowed > want+1 {
		t.Errorf("hot key admitted %d of %d over %v, want %d ± 1 (B + L·T): the flood changed its accounting", hotAllowed, hotSent, elapsed, want)
	}

	// Past the longest TTL (a bucket of 5 at 10/s is whole after 0.5 s), one
	// sweep removes every key and the memory goes back to the baseline.
	clock.Advance(time.Second)
	s.sweep()
	after := heapInUse()
	if st := s.Stats(); st.Keys != 0 {
		t.Errorf("after the TTL and a sweep: %d keys tracked, want 0", st.Keys)
	}
	left := int64(after) - int64(base)
	t.Logf("E1: after TTL + sweep the heap is %+.2f MiB from the baseline (%.1f MiB)", float64(left)/(1<<20), float64(base)/(1<<20))
	if left > int64(base)/10+1<<20 {
		t.Errorf("after the TTL and a sweep the heap is %d B above the baseline of %d B, want ≤ 10%% + 1 MiB", left, base)
	}
	runtime.KeepAlive(s)
}

// TestChurnNeverLiftsLimits checks that churn never resets a limit (the
// c8s #365 class, where an LRU cap let rotating keys evict and so reset limited ones): 65,536
// rotating keys at 2,000 requests per second for 60 s of virtual time, against
// a cap of 10,000 keys, with a limit of 10 per key.
//
// The memory store never evicts a tracked key; keys that find their shard
// full share one overflow budget per policy. So (a) with a limit whose state
// outlives the run (10 per minute) the flood is limited as a whole and the
// share admitted is about the share of keys tracked, far from 100%; and (b) a
// key over its limit that rotates through the flood to push its own state out
// gets no more than B + L·T, whether it was tracked before the cap filled or
// came after.
func TestChurnNeverLiftsLimits(t *testing.T) {
	const (
		rotating = 65_536
		maxKeys  = 10_000
		perSec   = 2_000
		seconds  = 60
		total    = perSec * seconds
		step     = time.Second / perSec
	)
	t.Run("long window", func(t *testing.T) {
		t.Parallel()
		clock := kit.NewManualClock(t0) // t0 starts a minute
		s := newTestStore(t, Options{Clock: clock, MaxKeys: maxKeys, SweepInterval: time.Hour})
		p := mustPolicy(t, ratelimit.PolicyConfig{Name: "ten-a-minute", Algorithm: ratelimit.FixedWindow, Limit: 10, Window: time.Minute})
		reqs := []ratelimit.Request{{Policy: p}}
		out := make([]ratelimit.Decision, 1)
		allowed := 0
		for i := range total {
			if i%perSec == 0 {
				s.sweep() // once a virtual second, as the sweeper would
			}
			reqs[0].Key = "rot-" + strconv.Itoa(i%rotating)
			ok, err := s.Evaluate(context.Background(), reqs, out)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				allowed++
			}
			clock.Advance(step)
		}
		st := s.Stats()
		frac := float64(allowed) / total
		t.Logf("E2: %d of %d admitted (%.2f%%), %d keys tracked, %d overflow hits", allowed, total, 100*frac, st.Keys, st.OverflowHits)
		// Every request of a tracked key is admitted (each is asked ≤ 2 times
		// in the minute); the untracked rest share one budget of 10.
		tracked := 0
		for i := range total {
			if s.tracked("rot-" + strconv.Itoa(i%rotating)) {
				tracked++
			}
		}
		if allowed != tracked+10 {
			t.Errorf("%d admitted, want %d: every request of the %d tracked keys plus one overflow budget of 10", allowed, tracked+10, st.Keys)
		}
		if st.Keys > maxKeys || allowed == total || frac > 0.20 {
			t.Errorf("%d keys tracked, %.2f%% admitted; want ≤ %d keys and ≤ 20%% admitted (never 100%%)", st.Keys, 100*frac, maxKeys)
		}
	})
	for _, heavyFirst := range []bool{true, false} {
		name := map[bool]string{true: "heavy key tracked", false: "heavy key overflowed"}[heavyFirst]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			clock := kit.NewManualClock(t0)
			s := newTestStore(t, Options{Clock: clock, MaxKeys: maxKeys, SweepInterval: time.Hour})
			// L = 10/s with a burst of 10; a rotating key is asked about every
			// 33 s, so on its own it would never be limited.
			p := mustPolicy(t, ratelimit.PolicyConfig{Name: "ten-a-second", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 10})
			heavy := []ratelimit.Request{{Key: "heavy", Policy: p}}
			reqs := []ratelimit.Request{{Policy: p}}
			out := make([]ratelimit.Decision, 1)
			if !heavyFirst {
				// Fill every shard with keys that stay (a window of an hour)
				// so the heavy key can only be decided in overflow.
				long := mustPolicy(t, ratelimit.PolicyConfig{Name: "filler", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Hour})
				sh := &s.shards[s.shardIndex("heavy")]
				for i := 0; sh.t.len() < s.perShard; i++ {
					evaluate(t, s, ratelimit.Request{Key: "fill-" + strconv.Itoa(i), Policy: long})
				}
			}
			heavyAllowed, rotAllowed := 0, 0
			for i := range total {
				if i%perSec == 0 {
					s.sweep()
				}
				if i%2 == 0 { // the heavy key asks 1,000 times a second
					ok, err := s.Evaluate(context.Background(), heavy, out)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						heavyAllowed++
					}
				} else {
					reqs[0].Key = "rot-" + strconv.Itoa(i%rotating)
					ok, err := s.Evaluate(context.Background(), reqs, out)
					if err != nil {
						t.Fatal(err)
					}
					if ok {
						rotAllowed++
					}
				}
				clock.Advance(step)
			}
			bound := 10 + 10*seconds + 1 // B + L·T + 1
			t.Logf("E2 %s: heavy key admitted %d of %d (bound %d); rotating keys admitted %d of %d; %+v",
				name, heavyAllowed, total/2, bound, rotAllowed, total/2, s.Stats())
			if heavyAllowed > bound {
				t.Errorf("heavy key admitted %d over %d s, want ≤ B + L·T + 1 = %d: churn lifted its limit", heavyAllowed, seconds, bound)
			}
			if heavyFirst && heavyAllowed < bound-2 {
				t.Errorf("tracked heavy key admitted %d, want about %d: its accounting must stay exact", heavyAllowed, bound-1)
			}
		})
	}
}
