package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

var t0 = time.Unix(1_764_000_000, 0) // aligned to every window up to an hour

// newTestStore returns a store on clock (nil: the system clock), closed at
// the end of the test.
func newTestStore(t *testing.T, o Options) *Store {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustPolicy(t testing.TB, c ratelimit.PolicyConfig) *ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(c)
	if err != nil {
		t.Fatalf("NewPolicy(%+v): %v", c, err)
	}
	return p
}

// policiesOf100 returns, per algorithm, a policy that admits exactly 100
// units from a fresh key on a clock that does not move.
func policiesOf100(t testing.TB) []*ratelimit.Policy {
	t.Helper()
	return []*ratelimit.Policy{
		mustPolicy(t, ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 1}),
		mustPolicy(t, ratelimit.PolicyConfig{Name: "lb", Algorithm: ratelimit.LeakyBucket, Capacity: 100, Rate: 1}),
		mustPolicy(t, ratelimit.PolicyConfig{Name: "lbs", Algorithm: ratelimit.LeakyBucket, Capacity: 100, Rate: 1, Mode: ratelimit.Shape}),
		mustPolicy(t, ratelimit.PolicyConfig{Name: "gcra", Algorithm: ratelimit.GCRA, Burst: 100, Rate: 1}),
		mustPolicy(t, ratelimit.PolicyConfig{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour}),
		mustPolicy(t, ratelimit.PolicyConfig{Name: "sw", Algorithm: ratelimit.SlidingWindow, Limit: 100, Window: time.Hour}),
		mustPolicy(t, ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 100, Window: time.Hour}),
	}
}

func evaluate(t *testing.T, s *Store, reqs ...ratelimit.Request) (bool, []ratelimit.Decision) {
	t.Helper()
	out := make([]ratelimit.Decision, len(reqs))
	ok, err := s.Evaluate(context.Background(), reqs, out)
	if err != nil {
		t.Fatalf("Evaluate(%v): %v", reqs, err)
	}
	return ok, out
}

func peek(t *testing.T, s *Store, reqs ...ratelimit.Request) []ratelimit.Decision {
	t.Helper()
	out := make([]ratelimit.Decision, len(reqs))
	if err := s.Peek(context.Background(), reqs, out); err != nil {
		t.Fatalf("Peek(%v): %v", reqs, err)
	}
	return out
}

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name         string
		o            Options
		shards, per  int
		wantErrParts []string
	}{
		{name: "zero", o: Options{}, shards: 256, per: 1 << 12},
		{name: "rounded up", o: Options{Shards: 5, MaxKeys: 800}, shards: 8, per: 100},
		{name: "one shard", o: Options{Shards: 1, MaxKeys: 3}, shards: 1, per: 3},
		{name: "fewer keys than shards", o: Options{MaxKeys: 10}, shards: 8, per: 1},
		{name: "bad", o: Options{Shards: -1, MaxKeys: -2, SweepInterval: -time.Second},
			wantErrParts: []string{"shards", "max keys", "sweep interval"}},
		{name: "too many shards", o: Options{Shards: 1 << 20}, wantErrParts: []string{"shards"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.o)
			if tt.wantErrParts != nil {
				if err == nil {
					s.Close()
					t.Fatalf("New(%+v) = nil error, want one naming %v", tt.o, tt.wantErrParts)
				}
				for _, part := range tt.wantErrParts {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("New(%+v) error %q does not name %q", tt.o, err, part)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("New(%+v): %v", tt.o, err)
			}
			defer s.Close()
			if len(s.shards) != tt.shards || s.perShard != tt.per {
				t.Errorf("New(%+v): %d shards of %d keys, want %d of %d", tt.o, len(s.shards), s.perShard, tt.shards, tt.per)
			}
		})
	}
}

func TestCloseIsIdempotent(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	// The store still decides after Close.
	p := policiesOf100(t)[0]
	if ok, _ := evaluate(t, s, ratelimit.Request{Key: "k", Policy: p}); !ok {
		t.Error("Evaluate after Close = denied, want allowed")
	}
}

func TestInvalidRequests(t *testing.T) {
	s := newTestStore(t, Options{})
	p := policiesOf100(t)[0]
	ctx := context.Background()
	out := make([]ratelimit.Decision, 2)
	if _, err := s.Evaluate(ctx, []ratelimit.Request{{Key: "k", Policy: p, Cost: 101}}, out); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("Evaluate(cost 101 of 100) error = %v, want ErrInvalidCost", err)
	}
	if _, err := s.Evaluate(ctx, []ratelimit.Request{{Key: "k", Policy: p, Cost: -1}}, out); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("Evaluate(cost -1) error = %v, want ErrInvalidCost", err)
	}
	if _, err := s.Evaluate(ctx, []ratelimit.Request{{Key: "k"}}, out); err == nil {
		t.Error("Evaluate(nil policy) = nil error, want one")
	}
	if _, err := s.Evaluate(ctx, []ratelimit.Request{{Key: "k", Policy: p}}, nil); err == nil {
		t.Error("Evaluate(out too short) = nil error, want one")
	}
	if err := s.Peek(ctx, []ratelimit.Request{{Key: "k", Policy: p, Cost: 101}}, out); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("Peek(cost 101 of 100) error = %v, want ErrInvalidCost", err)
	}
	if st := s.Stats(); st.Keys != 0 {
		t.Errorf("after invalid requests: %d keys tracked, want 0", st.Keys)
	}
}

// TestConcurrentExact hammers one key from 64 goroutines on a clock that does
// not move: exactly the limit is admitted, for every algorithm.
func TestConcurrentExact(t *testing.T) {
	const goroutines, each = 64, 20
	for _, p := range policiesOf100(t) {
		t.Run(p.Name(), func(t *testing.T) {
			t.Parallel()
			s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
			var admitted atomic.Int64
			var wg sync.WaitGroup
			for range goroutines {
				wg.Go(func() {
					reqs := []ratelimit.Request{{Key: "hot", Policy: p}}
					out := make([]ratelimit.Decision, 1)
					for range each {
						ok, err := s.Evaluate(context.Background(), reqs, out)
						if err != nil {
							t.Error(err)
							return
						}
						if ok {
							admitted.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if got := admitted.Load(); got != 100 {
				t.Errorf("%d concurrent requests on one key admitted %d, want exactly 100", goroutines*each, got)
			}
		})
	}
}

// keysInDistinctShards returns n keys that fall in n different shards.
func keysInDistinctShards(t *testing.T, s *Store, n int) []string {
	t.Helper()
	seen := map[int]bool{}
	var keys []string
	for i := 0; len(keys) < n; i++ {
		if i > 1e5 {
			t.Fatalf("found only %d keys in distinct shards", len(keys))
		}
		k := "key-" + strconv.Itoa(i)
		if sh := s.shardIndex(k); !seen[sh] {
			seen[sh] = true
			keys = append(keys, k)
		}
	}
	return keys
}

func TestAllOrNothingAcrossShards(t *testing.T) {
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
	keys := keysInDistinctShards(t, s, 3)
	// Listed so that the shards are not in ascending order.
	if s.shardIndex(keys[0]) < s.shardIndex(keys[1]) {
		keys[0], keys[1] = keys[1], keys[0]
	}
	wide := mustPolicy(t, ratelimit.PolicyConfig{Name: "wide", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	narrow := mustPolicy(t, ratelimit.PolicyConfig{Name: "narrow", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Hour})
	shadow := mustPolicy(t, ratelimit.PolicyConfig{Name: "shadow", Algorithm: ratelimit.SlidingLog, Limit: 1, Window: time.Hour})
	reqs := []ratelimit.Request{
		{Key: keys[0], Policy: wide},
		{Key: keys[1], Policy: narrow},
		{Key: keys[2], Policy: shadow, Shadow: true},
	}
	for i, want := range []bool{true, true, false, false} {
		ok, out := evaluate(t, s, reqs...)
		if ok != want {
			t.Fatalf("Evaluate #%d = %v, want %v", i+1, ok, want)
		}
		if i >= 2 {
			// Denied by narrow: wide would admit but reports its units untouched.
			if !out[0].Allowed || out[0].Remaining != 3 {
				t.Errorf("Evaluate #%d: wide = %+v, want allowed with remaining 3 (nothing consumed)", i+1, out[0])
			}
			if out[1].Allowed {
				t.Errorf("Evaluate #%d: narrow allowed, want denied", i+1)
			}
		}
		if i >= 1 && out[2].Allowed {
			t.Errorf("Evaluate #%d: shadow allowed, want denied (its one unit went to #1)", i+1)
		}
	}
	got := peek(t, s, reqs...)
	if got[0].Remaining != 3 || got[1].Remaining != 0 || got[2].Remaining != 0 {
		t.Errorf("after 2 admitted and 2 denied: remaining %d, %d, %d; want 3, 0, 0", got[0].Remaining, got[1].Remaining, got[2].Remaining)
	}
}

// TestSameKeyTwice checks that two limits on one key in one Evaluate are
// decided in order against the same state, so their costs add up.
func TestSameKeyTwice(t *testing.T) {
	for _, p := range policiesOf100(t) {
		t.Run(p.Name(), func(t *testing.T) {
			s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
			r := ratelimit.Request{Key: "k", Policy: p, Cost: 40}
			ok, out := evaluate(t, s, r, r)
			if !ok || out[0].Remaining != 60 || out[1].Remaining != 20 {
				t.Fatalf("Evaluate(40, 40) = %v %+v, want admitted with remaining 60 then 20", ok, out)
			}
			// 20 left: 15 fits, 15+15 does not, so neither is taken.
			r.Cost = 15
			ok, out = evaluate(t, s, r, r)
			if ok || !out[0].Allowed || out[1].Allowed {
				t.Fatalf("Evaluate(15, 15) = %v %+v, want denied by the second", ok, out)
			}
			if out[0].Remaining != 20 {
				t.Errorf("Evaluate(15, 15): first reports remaining %d, want 20 (nothing consumed)", out[0].Remaining)
			}
			if d := peek(t, s, r)[0]; d.Remaining != 20 {
				t.Errorf("Peek after denied pair: remaining %d, want 20", d.Remaining)
			}
		})
	}
}

func TestNewKeyNotStoredOnDenial(t *testing.T) {
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
	one := mustPolicy(t, ratelimit.PolicyConfig{Name: "one", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Hour})
	evaluate(t, s, ratelimit.Request{Key: "full", Policy: one})
	ok, _ := evaluate(t, s, ratelimit.Request{Key: "fresh", Policy: one}, ratelimit.Request{Key: "full", Policy: one})
	if ok {
		t.Fatal("Evaluate(fresh, full) admitted, want denied")
	}
	if st := s.Stats(); st.Keys != 1 {
		t.Errorf("after a denied request on a new key: %d keys tracked, want 1", st.Keys)
	}
}

func TestPeekAndReset(t *testing.T) {
	for _, p := range policiesOf100(t) {
		t.Run(p.Name(), func(t *testing.T) {
			s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
			r := ratelimit.Request{Key: "k", Policy: p, Cost: 30}
			if d := peek(t, s, r)[0]; !d.Allowed || d.Remaining != 100 || d.Reset != 0 {
				t.Errorf("Peek(fresh key) = %+v, want allowed, remaining 100, no reset", d)
			}
			if st := s.Stats(); st.Keys != 0 {
				t.Errorf("Peek created %d keys, want 0", st.Keys)
			}
			evaluate(t, s, r)
			for range 3 {
				if d := peek(t, s, r)[0]; !d.Allowed || d.Remaining != 70 {
					t.Errorf("Peek(cost 30) after consuming 30 = %+v, want allowed, remaining 70", d)
				}
			}
			if err := s.Reset(context.Background(), []ratelimit.Request{r}); err != nil {
				t.Fatal(err)
			}
			if d := peek(t, s, r)[0]; d.Remaining != 100 {
				t.Errorf("Peek after Reset: remaining %d, want 100", d.Remaining)
			}
			if st := s.Stats(); st.Keys != 0 {
				t.Errorf("after Reset: %d keys tracked, want 0", st.Keys)
			}
		})
	}
}

// TestAlgorithmChange checks that a key's state written under one algorithm
// is not read by another: a policy change starts a fresh budget.
func TestAlgorithmChange(t *testing.T) {
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
	var ps []*ratelimit.Policy // one per algorithm
	for _, p := range policiesOf100(t) {
		if p.Mode() != ratelimit.Shape {
			ps = append(ps, p)
		}
	}
	for i, p := range ps {
		ok, out := evaluate(t, s, ratelimit.Request{Key: "k", Policy: p, Cost: 100})
		if !ok {
			t.Errorf("step %d: Evaluate(cost 100) under %s (after %s) = %+v, want a fresh budget", i, p, ps[max(i-1, 0)], out[0])
		}
	}
}

// TestExpiredKeyStartsAfresh checks that a key past its TTL starts afresh
// before the sweeper has removed it.
func TestExpiredKeyStartsAfresh(t *testing.T) {
	clock := kit.NewManualClock(t0)
	s := newTestStore(t, Options{Clock: clock, SweepInterval: time.Hour})
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Second})
	r := ratelimit.Request{Key: "k", Policy: p, Cost: 2}
	evaluate(t, s, r)
	clock.Advance(time.Second)
	if ok, out := evaluate(t, s, r); !ok || out[0].Remaining != 0 {
		t.Errorf("Evaluate one window later = %v %+v, want admitted with remaining 0", ok, out[0])
	}
}

// TestOverflowNeverUnlimited sends many requests from far more distinct keys
// than the cap allows: tracked keys keep their exact budgets, every other key
// shares one budget, and the total admitted is exactly that sum.
func TestOverflowNeverUnlimited(t *testing.T) {
	const (
		maxKeys   = 64
		distinct  = 100_000
		perKey    = 3
		limit     = 5
		overflows = (distinct - maxKeys) * perKey
	)
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0), Shards: 4, MaxKeys: maxKeys})
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.FixedWindow, Limit: limit, Window: time.Hour})
	reqs := []ratelimit.Request{{Policy: p}}
	out := make([]ratelimit.Decision, 1)
	admitted := 0
	for i := range distinct {
		reqs[0].Key = "user-" + strconv.Itoa(i)
		for range perKey {
			ok, err := s.Evaluate(context.Background(), reqs, out)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				admitted++
			}
		}
	}
	// 16 keys per shard; 10^5 keys fill every shard.
	if want := maxKeys*perKey + limit; admitted != want {
		t.Errorf("%d keys × %d requests admitted %d, want %d: %d tracked keys × %d plus one shared overflow budget of %d",
			distinct, perKey, admitted, want, maxKeys, perKey, limit)
	}
	st := s.Stats()
	if st.Keys != maxKeys || st.OverflowHits != overflows {
		t.Errorf("Stats = %+v, want %d keys and %d overflow hits", st, maxKeys, overflows)
	}
	// No tracked key was evicted: each still has exactly limit-perKey left.
	tracked := 0
	for i := range distinct {
		k := "user-" + strconv.Itoa(i)
		if !s.tracked(k) {
			continue
		}
		tracked++
		if d := peek(t, s, ratelimit.Request{Key: k, Policy: p})[0]; d.Remaining != limit-perKey {
			t.Errorf("tracked key %s: remaining %d, want %d", k, d.Remaining, limit-perKey)
		}
	}
	if tracked != maxKeys {
		t.Errorf("%d keys tracked, want %d", tracked, maxKeys)
	}
	// An untracked key reports, and is limited by, the spent overflow budget.
	late := ratelimit.Request{Key: "late-comer", Policy: p}
	if d := peek(t, s, late)[0]; d.Allowed || d.Remaining != 0 {
		t.Errorf("Peek(untracked key) = %+v, want denied by the spent overflow budget", d)
	}
	if ok, _ := evaluate(t, s, late, ratelimit.Request{Key: "user-0", Policy: p}); ok {
		t.Error("Evaluate(untracked key with a tracked one) admitted, want denied by the overflow budget")
	}
	// Reset of an untracked key does not refill the shared budget.
	if err := s.Reset(context.Background(), []ratelimit.Request{late}); err != nil {
		t.Fatal(err)
	}
	if ok, _ := evaluate(t, s, late); ok {
		t.Error("Evaluate(untracked key) after Reset admitted, want denied: Reset must not refill the overflow budget")
	}
}

// TestOverflowPerPolicy checks that the overflow budget is one per policy
// name and algorithm, and that keys are tracked again once room is made.
func TestOverflowPerPolicy(t *testing.T) {
	clock := kit.NewManualClock(t0)
	s := newTestStore(t, Options{Clock: clock, Shards: 1, MaxKeys: 1, SweepInterval: time.Hour})
	a := mustPolicy(t, ratelimit.PolicyConfig{Name: "a", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second})
	b := mustPolicy(t, ratelimit.PolicyConfig{Name: "b", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second})
	steps := []struct {
		key  string
		p    *ratelimit.Policy
		want bool
	}{
		{"tracked", a, true},
		{"x", a, true},  // a's overflow budget
		{"y", a, false}, // shares it with x
		{"x", b, true},  // b's own overflow budget
	}
	for _, st := range steps {
		if ok, _ := evaluate(t, s, ratelimit.Request{Key: st.key, Policy: st.p}); ok != st.want {
			t.Errorf("Evaluate(%s under %s) = %v, want %v", st.key, st.p.Name(), ok, st.want)
		}
	}
	clock.Advance(time.Second)
	s.sweep()
	if st := s.Stats(); st.Keys != 0 || st.Expired != 1 {
		t.Errorf("after the TTL and a sweep: %+v, want 0 keys, 1 expired", st)
	}
	if ok, _ := evaluate(t, s, ratelimit.Request{Key: "y", Policy: a}); !ok {
		t.Error("Evaluate(y) after the sweep = denied, want allowed")
	}
	if st := s.Stats(); st.Keys != 1 {
		t.Errorf("after the sweep y is tracked: %d keys, want 1", st.Keys)
	}
}

// TestOverflowInMultiLimitRequest covers several limits where some keys are
// tracked and some overflow, including two limits of one request sharing an
// overflow budget.
func TestOverflowInMultiLimitRequest(t *testing.T) {
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0), Shards: 1, MaxKeys: 1})
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "p", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})
	evaluate(t, s, ratelimit.Request{Key: "tracked", Policy: p})
	ok, out := evaluate(t, s,
		ratelimit.Request{Key: "tracked", Policy: p, Cost: 2},
		ratelimit.Request{Key: "u1", Policy: p, Cost: 3},
		ratelimit.Request{Key: "u2", Policy: p, Cost: 4})
	if !ok || out[0].Remaining != 7 || out[1].Remaining != 7 || out[2].Remaining != 3 {
		t.Fatalf("Evaluate(tracked 2, u1 3, u2 4) = %v %+v, want admitted, remaining 7, 7, 3 (u1 and u2 share one budget)", ok, out)
	}
	ok, out = evaluate(t, s,
		ratelimit.Request{Key: "tracked", Policy: p, Cost: 1},
		ratelimit.Request{Key: "u3", Policy: p, Cost: 4})
	if ok || out[1].Allowed || out[0].Remaining != 7 {
		t.Fatalf("Evaluate(tracked 1, u3 4) = %v %+v, want denied by the overflow budget, tracked untouched", ok, out)
	}
	if st := s.Stats(); st.Keys != 1 || st.OverflowHits != 3 {
		t.Errorf("Stats = %+v, want 1 key, 3 overflow hits", st)
	}
}

// TestZeroAllocs checks that deciding one limit for a tracked key allocates
// nothing, for every algorithm, on the system clock and on a manual one. It
// counts every allocation over the runs (testing.AllocsPerRun rounds the
// average down, which would hide an occasional one).
func TestZeroAllocs(t *testing.T) {
	clocks := map[string]ratelimit.Clock{"system": nil, "manual": kit.NewManualClock(t0)}
	for name, clock := range clocks {
		for _, p := range policiesOf100(t) {
			t.Run(name+"/"+p.Name(), func(t *testing.T) {
				s := newTestStore(t, Options{Clock: clock})
				reqs := []ratelimit.Request{{Key: "k", Policy: p}}
				out := make([]ratelimit.Decision, 1)
				ctx := context.Background()
				step := func() {
					if m, ok := clock.(*kit.ManualClock); ok {
						m.Advance(time.Minute) // the buckets refill, the log turns over
					}
					if _, err := s.Evaluate(ctx, reqs, out); err != nil {
						t.Fatal(err)
					}
				}
				for range 200 { // let the sliding log's array reach its size
					step()
				}
				if n := mallocs(1000, step); n != 0 {
					t.Errorf("1000 Evaluate calls on a tracked key allocated %d times, want 0", n)
				}
			})
		}
	}
}

// mallocs returns the number of heap allocations runs calls of f make in
// total, measured as testing.AllocsPerRun does, the fewest of three
// attempts. The count is process-wide: a goroutine outside f (the store's
// sweeper, the race detector's runtime, a parallel test) can allocate
// during an attempt on a busy machine, while an allocation inside f shows
// in every attempt, at least runs times.
func mallocs(runs int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	fewest := uint64(math.MaxUint64)
	for range 3 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range runs {
			f()
		}
		runtime.ReadMemStats(&after)
		fewest = min(fewest, after.Mallocs-before.Mallocs)
	}
	return fewest
}

// TestSlidingLogReusesArray checks that a key's sliding log keeps one array
// in steady state instead of reallocating as entries leave the window.
func TestSlidingLogReusesArray(t *testing.T) {
	clock := kit.NewManualClock(t0)
	s := newTestStore(t, Options{Clock: clock})
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 10, Window: 10 * time.Millisecond})
	r := ratelimit.Request{Key: "k", Policy: p}
	var array *kit.LogEntry
	for i := range 1000 {
		if ok, _ := evaluate(t, s, r); !ok {
			t.Fatalf("request %d denied, want allowed (one per ms, 10 per 10ms)", i)
		}
		clock.Advance(time.Millisecond)
		log := s.storedState("k").Log
		switch {
		case i == 100:
			array = &log[:1][0]
		case i > 100 && &log[:1][0] != array:
			t.Fatalf("request %d moved the log to a new array (len %d, cap %d)", i, len(log), cap(log))
		}
	}
}

func TestMultiLimitBeyondInline(t *testing.T) {
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "p", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Hour})
	reqs := make([]ratelimit.Request, 3*maxInline)
	for i := range reqs {
		reqs[i] = ratelimit.Request{Key: fmt.Sprint("k", i%(2*maxInline)), Policy: p}
	}
	// Keys 0..7 appear twice, so one call takes both their units.
	for i, want := range []bool{true, false} {
		ok, _ := evaluate(t, s, reqs...)
		if ok != want {
			t.Fatalf("Evaluate #%d of %d limits = %v, want %v", i+1, len(reqs), ok, want)
		}
	}
	if st := s.Stats(); st.Keys != 2*maxInline {
		t.Errorf("%d keys tracked, want %d", st.Keys, 2*maxInline)
	}
}
