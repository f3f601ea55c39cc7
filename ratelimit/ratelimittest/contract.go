package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// everyAlgorithm returns one policy per algorithm and leaky bucket mode, each
// with a limit of 3 and a period of 3 s.
func everyAlgorithm(t testing.TB) []*ratelimit.Policy {
	t.Helper()
	cfgs := []ratelimit.PolicyConfig{
		{Name: "token_bucket", Algorithm: ratelimit.TokenBucket, Capacity: 3, Rate: 1},
		{Name: "leaky_bucket_police", Algorithm: ratelimit.LeakyBucket, Capacity: 3, Rate: 1},
		{Name: "leaky_bucket_shape", Algorithm: ratelimit.LeakyBucket, Capacity: 3, Rate: 1, Mode: ratelimit.Shape, MaxDelay: 10 * time.Second},
		{Name: "fixed_window", Algorithm: ratelimit.FixedWindow, Limit: 3, Window: 3 * time.Second},
		{Name: "sliding_log", Algorithm: ratelimit.SlidingLog, Limit: 3, Window: 3 * time.Second},
		{Name: "sliding_window", Algorithm: ratelimit.SlidingWindow, Limit: 3, Window: 3 * time.Second},
		{Name: "gcra", Algorithm: ratelimit.GCRA, Burst: 3, Rate: 1},
	}
	ps := make([]*ratelimit.Policy, len(cfgs))
	for i, c := range cfgs {
		ps[i] = mustPolicy(t, c)
	}
	return ps
}

func (s *suite) runContract(t *testing.T) {
	t.Run("FreshKeyIsFull", s.testFreshKeyIsFull)
	t.Run("PeekNeverConsumes", s.testPeekNeverConsumes)
	t.Run("AllOrNothing", s.testAllOrNothing)
	t.Run("Shadow", s.testShadow)
	t.Run("Reset", s.testReset)
	t.Run("InvalidRequests", s.testInvalidRequests)
	t.Run("Limiter", s.testLimiter)
	t.Run("OpaqueKeys", s.testOpaqueKeys)
	t.Run("ClockBackwards", s.testClockBackwards)
	t.Run("SlidingLogSameMicrosecond", s.testSlidingLogSameMicrosecond)
	t.Run("Concurrent", s.testConcurrent)
}

func (s *suite) testFreshKeyIsFull(t *testing.T) {
	e := s.newEnv(t, oddStart)
	for _, p := range everyAlgorithm(t) {
		req := ratelimit.Request{Key: e.key(p.Name()), Policy: p, Cost: 2}
		full := ratelimit.Decision{Allowed: true, Limit: 3, Remaining: 3}
		e.expect("Peek(unseen "+p.Name()+" key, cost 2)", e.peek1(req), full)
		if d := e.evaluate1(req); !d.Allowed || d.Remaining != 1 {
			t.Errorf("Evaluate(unseen %s key, cost 2) = %s, remaining %d; want allowed, remaining 1", p.Name(), verdict(d.Allowed), d.Remaining)
		}
	}
}

func (s *suite) testPeekNeverConsumes(t *testing.T) {
	e := s.newEnv(t, alignedStart)
	for _, p := range everyAlgorithm(t) {
		req := ratelimit.Request{Key: e.key(p.Name()), Policy: p}
		e.set(0)
		for range 5 {
			if d := e.peek1(req); d.Remaining != 3 {
				t.Fatalf("%s: Peek of an unseen key: remaining = %d, want 3", p.Name(), d.Remaining)
			}
		}
		if d := e.evaluate1(req); !d.Allowed {
			t.Fatalf("%s: first Evaluate(%s, cost 1) = denied", p.Name(), e.when())
		}
		first := e.peek1(req)
		for range 5 {
			req.Cost = 3 // Peek of a cost that cannot be admitted must not consume either
			e.peek1(req)
			req.Cost = 1
			e.expect(fmt.Sprintf("%s: repeated Peek(%s, cost 1)", p.Name(), e.when()), e.peek1(req), first)
		}
		req.Cost = 2
		if d := e.evaluate1(req); !d.Allowed {
			t.Errorf("%s: Evaluate(%s, cost 2) after peeks = denied, want allowed: Peek consumed", p.Name(), e.when())
		}
		req.Cost = 1
		if d := e.evaluate1(req); d.Allowed {
			t.Errorf("%s: Evaluate(%s, cost 1) after 3 units = allowed, want denied", p.Name(), e.when())
		}
	}
}

// testAllOrNothing checks that a request denied by one limit consumes from
// none, whatever the position of the denying limit.
func (s *suite) testAllOrNothing(t *testing.T) {
	tb := mustPolicy(t, ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	fw := mustPolicy(t, ratelimit.PolicyConfig{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Second})
	sl := mustPolicy(t, ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 4, Window: 10 * time.Second})
	orders := [][]*ratelimit.Policy{{tb, fw, sl}, {fw, tb, sl}, {tb, sl, fw}}
	for _, order := range orders {
		names := make([]string, len(order))
		for i, p := range order {
			names[i] = p.Name()
		}
		t.Run(strings.Join(names, "_"), func(t *testing.T) {
			e := s.newEnv(t, alignedStart)
			reqs := make([]ratelimit.Request, len(order))
			for i, p := range order {
				reqs[i] = ratelimit.Request{Key: e.key(p.Name()), Policy: p}
			}
			// remaining after each of the two admitted requests, then on the denial
			want := map[string][]int64{"tb": {4, 3, 3}, "fw": {1, 0, 0}, "sl": {3, 2, 2}}
			for step := range 3 {
				admitted, out := e.evaluate(reqs...)
				if admitted != (step < 2) {
					t.Fatalf("Evaluate(%s, all three limits) #%d = %s, want %s", e.when(), step+1, verdict(admitted), verdict(step < 2))
				}
				for i, p := range order {
					d := out[i]
					wantAllowed := step < 2 || p != fw
					if d.Allowed != wantAllowed || d.Remaining != want[p.Name()][step] {
						t.Errorf("Evaluate #%d: limit %s = %s with remaining %d, want %s with remaining %d",
							step+1, p.Name(), verdict(d.Allowed), d.Remaining, verdict(wantAllowed), want[p.Name()][step])
					}
					if !admitted {
						// A limit's own verdict on a denied request reports its state as it is.
						e.expect(fmt.Sprintf("Evaluate #%d: limit %s", step+1, p.Name()), d, e.peek1(reqs[i]))
					}
				}
			}
			// The denial consumed nothing: the other limits still have exactly what they had.
			tbReq, slReq := reqs[indexOf(order, tb)], reqs[indexOf(order, sl)]
			tbReq.Cost, slReq.Cost = 3, 2
			if d := e.evaluate1(tbReq); !d.Allowed || d.Remaining != 0 {
				t.Errorf("Evaluate(%s, tb alone, cost 3) = %s, remaining %d; want allowed, remaining 0 (the denied request consumed from tb)", e.when(), verdict(d.Allowed), d.Remaining)
			}
			if d := e.evaluate1(slReq); !d.Allowed || d.Remaining != 0 {
				t.Errorf("Evaluate(%s, sl alone, cost 2) = %s, remaining %d; want allowed, remaining 0 (the denied request consumed from sl)", e.when(), verdict(d.Allowed), d.Remaining)
			}
		})
	}
}

func indexOf(ps []*ratelimit.Policy, p *ratelimit.Policy) int {
	for i := range ps {
		if ps[i] == p {
			return i
		}
	}
	panic("policy not in list")
}

// testShadow checks that a shadow limit never denies, and consumes only when
// the request is admitted and it would admit too.
func (s *suite) testShadow(t *testing.T) {
	hard := mustPolicy(t, ratelimit.PolicyConfig{Name: "real", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})
	shadow := mustPolicy(t, ratelimit.PolicyConfig{Name: "shadow", Algorithm: ratelimit.FixedWindow, Limit: 3, Window: time.Second})
	e := s.newEnv(t, alignedStart)
	r := ratelimit.Request{Key: e.key("real"), Policy: hard}
	sh := ratelimit.Request{Key: e.key("shadow"), Policy: shadow, Shadow: true}
	type step struct {
		at                   time.Duration
		realCost, shCost     int64
		admitted, shAllowed  bool
		realRemaining, shRem int64
	}
	steps := []step{
		{0, 2, 2, true, true, 8, 1},
		{0, 2, 2, true, false, 6, 1},   // the shadow would deny: admitted anyway, shadow not consumed
		{0, 1, 1, true, true, 5, 0},    // proves the line above consumed nothing from the shadow
		{0, 1, 1, true, false, 4, 0},   // still admitted
		{s1, 10, 1, false, true, 5, 3}, // real denies (5 tokens after 1 s); the shadow would admit: not consumed
		{s1, 5, 3, true, true, 0, 0},   // proves it
	}
	for i, st := range steps {
		e.set(st.at)
		r.Cost, sh.Cost = st.realCost, st.shCost
		admitted, out := e.evaluate(r, sh)
		if admitted != st.admitted || out[0].Allowed != st.admitted || out[0].Remaining != st.realRemaining ||
			out[1].Allowed != st.shAllowed || out[1].Remaining != st.shRem {
			t.Errorf("step %d: Evaluate(%s, real cost %d, shadow cost %d) = %s; real %s remaining %d; shadow %s remaining %d\n"+
				"want %s; real %s remaining %d; shadow %s remaining %d",
				i+1, e.when(), st.realCost, st.shCost,
				verdict(admitted), verdict(out[0].Allowed), out[0].Remaining, verdict(out[1].Allowed), out[1].Remaining,
				verdict(st.admitted), verdict(st.admitted), st.realRemaining, verdict(st.shAllowed), st.shRem)
		}
	}
	// A request with only shadow limits is always admitted.
	e.set(s1)
	sh.Cost = 1
	if admitted, out := e.evaluate(sh); !admitted || out[0].Allowed {
		t.Errorf("Evaluate(%s, exhausted shadow limit only) = %s with the shadow %s; want allowed with the shadow denied", e.when(), verdict(admitted), verdict(out[0].Allowed))
	}
}

const s1 = time.Second

func (s *suite) testReset(t *testing.T) {
	e := s.newEnv(t, oddStart)
	for _, p := range everyAlgorithm(t) {
		a := ratelimit.Request{Key: e.key(p.Name() + "/a"), Policy: p, Cost: 3}
		b := ratelimit.Request{Key: e.key(p.Name() + "/b"), Policy: p, Cost: 3}
		e.evaluate(a)
		e.evaluate(b)
		a.Cost, b.Cost = 1, 1
		if d := e.evaluate1(a); d.Allowed {
			t.Fatalf("%s: Evaluate(%s, exhausted key) = allowed", p.Name(), e.when())
		}
		e.reset(a)
		e.expect(p.Name()+": Peek after Reset", e.peek1(a), ratelimit.Decision{Allowed: true, Limit: 3, Remaining: 3})
		a.Cost = 3
		if d := e.evaluate1(a); !d.Allowed {
			t.Errorf("%s: Evaluate(%s, cost 3) after Reset = denied, want allowed", p.Name(), e.when())
		}
		if d := e.peek1(b); d.Remaining != 0 {
			t.Errorf("%s: Reset of one key changed another: remaining %d, want 0", p.Name(), d.Remaining)
		}
		// Resetting unseen keys, several at once, is fine.
		e.reset(ratelimit.Request{Key: e.key(p.Name() + "/never"), Policy: p}, b)
		if d := e.peek1(b); d.Remaining != 3 {
			t.Errorf("%s: after Reset of two keys: remaining %d, want 3", p.Name(), d.Remaining)
		}
	}
}

func (s *suite) testInvalidRequests(t *testing.T) {
	e := s.newEnv(t, oddStart)
	ctx := context.Background()
	for _, p := range everyAlgorithm(t) {
		good := ratelimit.Request{Key: e.key(p.Name() + "/good"), Policy: p, Cost: 1}
		for _, cost := range []int64{-1, p.Max() + 1} {
			bad := ratelimit.Request{Key: e.key(p.Name() + "/bad"), Policy: p, Cost: cost}
			out := make([]ratelimit.Decision, 2)
			if _, err := e.store.Evaluate(ctx, []ratelimit.Request{good, bad}, out); !errors.Is(err, ratelimit.ErrInvalidCost) {
				t.Errorf("%s: Evaluate(cost %d) error = %v, want ErrInvalidCost", p.Name(), cost, err)
			}
			if err := e.store.Peek(ctx, []ratelimit.Request{bad}, out); !errors.Is(err, ratelimit.ErrInvalidCost) {
				t.Errorf("%s: Peek(cost %d) error = %v, want ErrInvalidCost", p.Name(), cost, err)
			}
		}
		if d := e.peek1(good); d.Remaining != 3 {
			t.Errorf("%s: a request with an invalid cost consumed from its valid limit: remaining %d, want 3", p.Name(), d.Remaining)
		}
		// Cost zero means one.
		zero := ratelimit.Request{Key: e.key(p.Name() + "/zero"), Policy: p}
		if d := e.evaluate1(zero); !d.Allowed || d.Remaining != 2 {
			t.Errorf("%s: Evaluate(cost 0) = %s, remaining %d; want allowed, remaining 2", p.Name(), verdict(d.Allowed), d.Remaining)
		}
	}
	if _, err := e.store.Evaluate(ctx, []ratelimit.Request{{Key: e.key("nil")}}, make([]ratelimit.Decision, 1)); err == nil {
		t.Error("Evaluate with a nil policy: no error")
	}
	p := everyAlgorithm(t)[0]
	two := []ratelimit.Request{{Key: e.key("a"), Policy: p}, {Key: e.key("b"), Policy: p}}
	if _, err := e.store.Evaluate(ctx, two, make([]ratelimit.Decision, 1)); err == nil {
		t.Error("Evaluate with out shorter than reqs: no error")
	}
	if d := e.peek(two...); d[0].Remaining != 3 || d[1].Remaining != 3 {
		t.Errorf("a rejected Evaluate consumed: remaining %d and %d, want 3 and 3", d[0].Remaining, d[1].Remaining)
	}
}

func (s *suite) testLimiter(t *testing.T) {
	e := s.newEnv(t, oddStart)
	ctx := context.Background()
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: e.key("lim"), Algorithm: ratelimit.TokenBucket, Capacity: 3, Rate: 1})
	q := mustPolicy(t, ratelimit.PolicyConfig{Name: e.key("other"), Algorithm: ratelimit.TokenBucket, Capacity: 3, Rate: 1})
	lim, err := ratelimit.NewLimiter(p, e.store)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ratelimit.NewLimiter(q, e.store)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		d, err := lim.Allow(ctx, "user")
		if err != nil || d.Allowed != (i < 3) {
			t.Errorf("Allow #%d = %s, %v; want %s", i+1, verdict(d.Allowed), err, verdict(i < 3))
		}
	}
	for _, n := range []int64{0, -1, 4} {
		if _, err := lim.AllowN(ctx, "user", n); !errors.Is(err, ratelimit.ErrInvalidCost) {
			t.Errorf("AllowN(%d) error = %v, want ErrInvalidCost", n, err)
		}
	}
	if d, err := other.Allow(ctx, "user"); err != nil || !d.Allowed {
		t.Errorf("another policy's Limiter on the same key: %s, %v; want allowed", verdict(d.Allowed), err)
	}
	e.clock.Advance(time.Second)
	if d, err := lim.Peek(ctx, "user"); err != nil || d.Remaining != 1 || d.Reset != 2*time.Second {
		t.Errorf("Peek 1s later = remaining %d, reset %v, %v; want 1, 2s", d.Remaining, d.Reset, err)
	}
	if err := lim.Reset(ctx, "user"); err != nil {
		t.Fatal(err)
	}
	if d, err := lim.AllowN(ctx, "user", 3); err != nil || !d.Allowed {
		t.Errorf("AllowN(3) after Reset = %s, %v; want allowed", verdict(d.Allowed), err)
	}
}

// testOpaqueKeys checks that keys are compared byte for byte: none of these
// keys shares a budget with another, whatever characters a store treats
// specially (Redis hash tags, separators, NUL).
func (s *suite) testOpaqueKeys(t *testing.T) {
	e := s.newEnv(t, alignedStart)
	p := mustPolicy(t, ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Minute})
	suffixes := []string{"", "a", "A", "a:", ":a", "a:b", "a|b", "{a}", "{a}:b", "{", "}", "{}", "a\x00", "a\x00b", "\x00",
		"ä", "a b", "a\n", "*", "?", "[a]", "a/b", "%2F", strings.Repeat("x", 4096)}
	for round := range 2 {
		for _, k := range suffixes {
			d := e.evaluate1(ratelimit.Request{Key: e.key("k") + k, Policy: p})
			if d.Allowed != (round == 0) {
				t.Errorf("round %d: key suffix %q = %s, want %s (keys collide)", round+1, k, verdict(d.Allowed), verdict(round == 0))
			}
		}
	}
}

// testClockBackwards checks that a clock that goes back never mints budget:
// after the first request at t1, requests at times up to t1 admit at most the
// limit in total, and every decision stays within bounds.
func (s *suite) testClockBackwards(t *testing.T) {
	for _, p := range everyAlgorithm(t) {
		t.Run(p.Name(), func(t *testing.T) {
			period := p.Period()
			t1 := 100 * period
			e := s.newEnv(t, alignedStart.Add(400*ms))
			req := ratelimit.Request{Key: e.key("partial"), Policy: p}
			e.set(t1)
			req.Cost = 2
			if d := e.evaluate1(req); !d.Allowed {
				t.Fatalf("Evaluate(%s, cost 2) on a fresh key = denied", e.when())
			}
			admitted := int64(2)
			req.Cost = 1
			offsets := []time.Duration{t1 - 10*period}
			for off := t1 - 10*period + period/2 + us; off < t1; off += period / 2 {
				offsets = append(offsets, off)
			}
			offsets = append(offsets, t1-us, t1)
			for _, off := range offsets {
				e.set(off)
				d := e.evaluate1(req)
				e.sane(fmt.Sprintf("Evaluate(%s, cost 1)", e.when()), p, d)
				if d.Allowed {
					admitted++
				}
				if admitted > 3 {
					t.Fatalf("Evaluate(%s, cost 1) = allowed: %d units admitted at or before t1 (limit 3); going back minted budget", e.when(), admitted)
				}
			}

			// An exhausted key stays exhausted however far back the clock goes.
			req = ratelimit.Request{Key: e.key("exhausted"), Policy: p, Cost: 3}
			e.set(t1)
			e.evaluate1(req)
			req.Cost = 1
			for _, back := range []time.Duration{us, period / 2, period, 3 * period, 50 * period} {
				e.set(t1 - back)
				d := e.evaluate1(req)
				e.sane(fmt.Sprintf("Evaluate(%s, cost 1)", e.when()), p, d)
				if d.Allowed {
					t.Errorf("Evaluate(%s, cost 1) on a key exhausted at t1 = allowed, want denied", e.when())
				}
			}
		})
	}
}

// testSlidingLogSameMicrosecond checks docs/semantics.md §2.7: log entries made in the
// same microsecond must stay distinct (a sorted set keyed by the time alone
// would merge them and undercount).
func (s *suite) testSlidingLogSameMicrosecond(t *testing.T) {
	const n = 500
	p := mustPolicy(t, ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: n, Window: time.Second})
	e := s.newEnv(t, oddStart)
	req := ratelimit.Request{Key: e.key("k"), Policy: p}
	for i := range n {
		d := e.evaluate1(req)
		if !d.Allowed || d.Remaining != int64(n-1-i) {
			t.Fatalf("Evaluate #%d at one instant = %s, remaining %d; want allowed, remaining %d", i+1, verdict(d.Allowed), d.Remaining, n-1-i)
		}
	}
	e.expect("Evaluate(t0, one more)", e.evaluate1(req), ratelimit.Decision{Limit: n, RetryAfter: time.Second, Reset: time.Second, Next: time.Second})
	e.set(time.Second - us)
	if d := e.peek1(req); d.Remaining != 0 {
		t.Errorf("Peek(%s): remaining %d, want 0", e.when(), d.Remaining)
	}
	e.set(time.Second)
	if d := e.peek1(req); d.Remaining != n {
		t.Errorf("Peek(%s): remaining %d, want %d: all entries leave together", e.when(), d.Remaining, n)
	}
}

// testConcurrent checks that Evaluate is atomic under concurrent callers: on
// a frozen clock exactly the limit is admitted, each admission sees its own
// remaining, and a limit that admits on a request another limit denies keeps
// its units.
func (s *suite) testConcurrent(t *testing.T) {
	const workers, each = 8, 25
	wide := mustPolicy(t, ratelimit.PolicyConfig{Algorithm: ratelimit.FixedWindow, Limit: 100, Window: time.Hour})
	narrow := mustPolicy(t, ratelimit.PolicyConfig{Algorithm: ratelimit.SlidingLog, Limit: 60, Window: time.Hour})
	e := s.newEnv(t, oddStart)
	reqs := []ratelimit.Request{{Key: e.key("wide"), Policy: wide}, {Key: e.key("narrow"), Policy: narrow}}
	var (
		mu        sync.Mutex
		remaining = map[int64]int{}
		errs      []error
		wg        sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for range each {
				out := make([]ratelimit.Decision, 2)
				admitted, err := e.store.Evaluate(context.Background(), reqs, out)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else if admitted {
					remaining[out[1].Remaining]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("concurrent Evaluate: %v", errs[0])
	}
	if len(remaining) != 60 {
		t.Errorf("%d distinct remaining values among admissions, want 60 (0..59 once each): %v", len(remaining), remaining)
	}
	for r, n := range remaining {
		if r < 0 || r >= 60 || n != 1 {
			t.Errorf("remaining %d reported %d times, want once", r, n)
		}
	}
	if d := e.peek(reqs...); d[0].Remaining != 40 || d[1].Remaining != 0 {
		t.Errorf("after %d concurrent requests: remaining %d and %d, want 40 and 0 (denied requests consumed)", workers*each, d[0].Remaining, d[1].Remaining)
	}
}
