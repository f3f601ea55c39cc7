package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// runLeases checks the concurrency limits of a [ratelimit.LeaseStore]; a
// store that is not one skips them.
func (s *suite) runLeases(t *testing.T) {
	t.Run("Timeline", s.testLeaseTimeline)
	t.Run("Renew", s.testLeaseRenew)
	t.Run("RenewMany", s.testLeaseRenewMany)
	t.Run("AllOrNothing", s.testLeaseAllOrNothing)
	t.Run("Invalid", s.testLeaseInvalid)
	t.Run("Concurrent", s.testLeaseConcurrent)
	t.Run("PeekWithoutID", s.testLeasePeekWithoutID)
}

// leaseEnv returns an env whose store is a LeaseStore, or skips t.
func (s *suite) leaseEnv(t *testing.T, t0 time.Time) (*env, ratelimit.LeaseStore) {
	t.Helper()
	e := s.newEnv(t, t0)
	ls, ok := e.store.(ratelimit.LeaseStore)
	if !ok {
		t.Skipf("%T is not a ratelimit.LeaseStore", e.store)
	}
	return e, ls
}

func concurrencyPolicy(t testing.TB, limit int64, ttl time.Duration) *ratelimit.Policy {
	return mustPolicy(t, ratelimit.PolicyConfig{Name: "cc", Algorithm: ratelimit.Concurrency, Limit: limit, LeaseTTL: ttl})
}

func (e *env) release(ls ratelimit.LeaseStore, reqs ...ratelimit.Request) {
	e.t.Helper()
	if err := ls.Release(context.Background(), reqs); err != nil {
		e.t.Fatalf("Release(%s): %v", e.when(), err)
	}
}

// testLeaseTimeline plays exact decisions of a limit of 2 with a 2 s TTL:
// taking, denying, taking again, releasing, expiring.
func (s *suite) testLeaseTimeline(t *testing.T) {
	e, ls := s.leaseEnv(t, alignedStart)
	p := concurrencyPolicy(t, 2, 2*time.Second)
	lease := func(id string) ratelimit.Request {
		return ratelimit.Request{Key: e.key("k"), Policy: p, Lease: id}
	}
	a, b, c, d := lease("a"), lease("b"), lease("c"), lease("d")
	e.set(0)
	e.expect("Peek(t0, fresh key)", e.peek1(a), ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 2})
	e.expect("Evaluate(t0, lease a)", e.evaluate1(a), ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 1, Reset: 2 * time.Second})
	e.set(500 * time.Millisecond)
	// b fills the limit: Next is the earliest other expiry (a at 2 s), capped.
	e.expect("Evaluate(t0+500ms, lease b)", e.evaluate1(b), ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 0, Reset: 2 * time.Second, Next: time.Second})
	e.expect("Evaluate(t0+500ms, lease c)", e.evaluate1(c),
		ratelimit.Decision{Limit: 2, Remaining: 0, Reset: 2 * time.Second, RetryAfter: time.Second, Next: time.Second})
	e.expect("Peek(t0+500ms, lease c)", e.peek1(c),
		ratelimit.Decision{Limit: 2, Remaining: 0, Reset: 2 * time.Second, RetryAfter: time.Second, Next: time.Second})
	e.set(1700 * time.Millisecond)
	// Taking a held lease again renews it and takes no second slot; the
	// earliest other lease (b) expires at 2.5 s.
	e.expect("Evaluate(t0+1.7s, lease a again)", e.evaluate1(a), ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 0, Reset: 2 * time.Second, Next: 800 * time.Millisecond})
	e.expect("Evaluate(t0+1.7s, lease c)", e.evaluate1(c),
		ratelimit.Decision{Limit: 2, Remaining: 0, Reset: 2 * time.Second, RetryAfter: 800 * time.Millisecond, Next: 800 * time.Millisecond})
	// A released slot is reusable at once; releasing twice is harmless.
	e.release(ls, b)
	e.release(ls, b)
	e.expect("Evaluate(t0+1.7s, lease c after b's release)", e.evaluate1(c), ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 0, Reset: 2 * time.Second, Next: time.Second})
	e.expect("Evaluate(t0+1.7s, lease d)", e.evaluate1(d),
		ratelimit.Decision{Limit: 2, Remaining: 0, Reset: 2 * time.Second, RetryAfter: time.Second, Next: time.Second})
	// a and c expire at 3.7 s: one microsecond before, both still count.
	e.set(3700*time.Millisecond - time.Microsecond)
	if got := e.evaluate1(d); got.Allowed {
		t.Errorf("Evaluate(%s, lease d) = allowed, want denied: a and c expire at t0+3.7s", e.when())
	}
	e.set(3700 * time.Millisecond)
	e.expect("Evaluate(t0+3.7s, lease d after expiry)", e.evaluate1(d), ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 1, Reset: 2 * time.Second})
	e.reset(d)
	e.expect("Peek(t0+3.7s, after Reset)", e.peek1(a), ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 2})
}

// testLeaseRenew checks that Renew keeps a lease past its first expiry and
// adds back one the store lost while its holder still held it.
func (s *suite) testLeaseRenew(t *testing.T) {
	e, ls := s.leaseEnv(t, oddStart)
	p := concurrencyPolicy(t, 1, time.Second)
	lease := func(id string) ratelimit.Request {
		return ratelimit.Request{Key: e.key("k"), Policy: p, Lease: id}
	}
	a, b, c := lease("a"), lease("b"), lease("c")
	e.set(0)
	if d := e.evaluate1(a); !d.Allowed {
		t.Fatalf("Evaluate(%s, lease a) = denied", e.when())
	}
	e.set(800 * time.Millisecond)
	if n, err := ls.Renew(context.Background(), []ratelimit.Request{a}); err != nil || n != 0 {
		t.Fatalf("Renew(%s, held lease a) = %d, %v; want 0 added back, no error", e.when(), n, err)
	}
	e.set(1500 * time.Millisecond)
	if d := e.evaluate1(b); d.Allowed {
		t.Errorf("Evaluate(%s, lease b) = allowed, want denied: a was renewed at t0+800ms until t0+1.8s", e.when())
	}
	e.set(1800 * time.Millisecond)
	if d := e.evaluate1(b); !d.Allowed {
		t.Errorf("Evaluate(%s, lease b) = denied, want allowed: a expired at t0+1.8s", e.when())
	}
	// a's holder still holds it: renewing adds it back, beside b.
	if n, err := ls.Renew(context.Background(), []ratelimit.Request{a}); err != nil || n != 1 {
		t.Fatalf("Renew(%s, expired lease a) = %d, %v; want 1 added back, no error", e.when(), n, err)
	}
	if d := e.evaluate1(c); d.Allowed {
		t.Errorf("Evaluate(%s, lease c) = allowed, want denied: a (added back) and b are held", e.when())
	}
	e.release(ls, b)
	if d := e.evaluate1(c); d.Allowed {
		t.Errorf("Evaluate(%s, lease c) = allowed, want denied: a (added back) is held", e.when())
	}
	e.release(ls, a)
	if d := e.evaluate1(c); !d.Allowed {
		t.Errorf("Evaluate(%s, lease c) = denied, want allowed: a and b were released", e.when())
	}
}

// testLeaseRenewMany renews hundreds of leases over several keys in one
// call: every held one is extended, every missing one added back and
// counted.
func (s *suite) testLeaseRenewMany(t *testing.T) {
	e, ls := s.leaseEnv(t, oddStart)
	const perKey, lost = 300, 7
	p := concurrencyPolicy(t, 2*perKey, time.Second)
	var all []ratelimit.Request
	e.set(0)
	for _, k := range []string{"x", "y"} {
		for i := range perKey {
			r := ratelimit.Request{Key: e.key(k), Policy: p, Lease: fmt.Sprintf("%s%d", k, i)}
			if i >= lost || k == "x" {
				if d := e.evaluate1(r); !d.Allowed {
					t.Fatalf("Evaluate(%s, lease %s) = denied", e.when(), r.Lease)
				}
			}
			all = append(all, r)
		}
	}
	e.set(800 * time.Millisecond)
	if n, err := ls.Renew(context.Background(), all); err != nil || n != lost {
		t.Fatalf("Renew(%s, %d leases, %d of them never taken) = %d, %v; want %d added back", e.when(), len(all), lost, n, err, lost)
	}
	e.set(1500 * time.Millisecond)
	for _, k := range []string{"x", "y"} {
		d := e.peek1(ratelimit.Request{Key: e.key(k), Policy: p, Lease: "probe"})
		if d.Remaining != perKey {
			t.Errorf("Peek(%s, key %s) remaining %d, want %d: all %d leases renewed until t0+1.8s", e.when(), k, d.Remaining, perKey, perKey)
		}
	}
}

// testLeaseAllOrNothing checks both directions of the composition with a
// rate limit: a concurrency denial consumes no rate budget, a rate denial
// takes no lease.
func (s *suite) testLeaseAllOrNothing(t *testing.T) {
	e, ls := s.leaseEnv(t, alignedStart)
	cc := concurrencyPolicy(t, 1, 10*time.Second)
	fw := mustPolicy(t, ratelimit.PolicyConfig{Name: "fw", Algorithm: ratelimit.FixedWindow, Limit: 2, Window: time.Minute})
	both := func(id string) []ratelimit.Request {
		return []ratelimit.Request{
			{Key: e.key("fw"), Policy: fw},
			{Key: e.key("cc"), Policy: cc, Lease: id},
		}
	}
	e.set(0)
	if ok, _ := e.evaluate(both("x")...); !ok {
		t.Fatalf("Evaluate(%s, x) = denied", e.when())
	}
	ok, out := e.evaluate(both("y")...)
	if ok || !out[0].Allowed || out[0].Remaining != 1 || out[1].Allowed {
		t.Errorf("Evaluate(%s, y while x holds the slot) = %s, fw %s remaining %d, cc %s; want denied, fw allowed remaining 1, cc denied",
			e.when(), verdict(ok), verdict(out[0].Allowed), out[0].Remaining, verdict(out[1].Allowed))
	}
	if d := e.peek1(both("")[0]); d.Remaining != 1 {
		t.Errorf("Peek(fw) after a concurrency denial: remaining %d, want 1 (the denial consumed)", d.Remaining)
	}
	e.release(ls, both("x")[1])
	if d := e.evaluate1(both("")[0]); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("Evaluate(%s, fw alone) = %s remaining %d, want allowed remaining 0", e.when(), verdict(d.Allowed), d.Remaining)
	}
	ok, out = e.evaluate(both("z")...)
	if ok || out[0].Allowed || !out[1].Allowed || out[1].Remaining != 1 {
		t.Errorf("Evaluate(%s, z with fw spent) = %s, fw %s, cc %s remaining %d; want denied, fw denied, cc allowed remaining 1",
			e.when(), verdict(ok), verdict(out[0].Allowed), verdict(out[1].Allowed), out[1].Remaining)
	}
	e.expect("Peek(cc) after a rate denial", e.peek1(both("w")[1]), ratelimit.Decision{Allowed: true, Limit: 1, Remaining: 1})
}

// testLeaseInvalid checks the requests a concurrency limit refuses.
func (s *suite) testLeaseInvalid(t *testing.T) {
	e, _ := s.leaseEnv(t, alignedStart)
	p := concurrencyPolicy(t, 3, time.Second)
	out := make([]ratelimit.Decision, 1)
	if _, err := e.store.Evaluate(context.Background(), []ratelimit.Request{{Key: e.key("k"), Policy: p}}, out); err == nil {
		t.Error("Evaluate(concurrency request without a lease id) = nil error")
	}
	_, err := e.store.Evaluate(context.Background(), []ratelimit.Request{{Key: e.key("k"), Policy: p, Lease: "a", Cost: 2}}, out)
	if !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("Evaluate(concurrency request of cost 2) = %v, want ErrInvalidCost", err)
	}
}

// testLeaseConcurrent races many requests for few slots: exactly the limit
// is admitted, and after releasing them all, the limit again.
func (s *suite) testLeaseConcurrent(t *testing.T) {
	e, ls := s.leaseEnv(t, alignedStart)
	const limit, callers = 5, 24
	p := concurrencyPolicy(t, limit, time.Minute)
	round := func(r int) []ratelimit.Request {
		var (
			mu   sync.Mutex
			held []ratelimit.Request
			wg   sync.WaitGroup
		)
		for i := range callers {
			wg.Go(func() {
				req := ratelimit.Request{Key: e.key("k"), Policy: p, Lease: fmt.Sprintf("r%d-%d", r, i)}
				out := make([]ratelimit.Decision, 1)
				ok, err := e.store.Evaluate(context.Background(), []ratelimit.Request{req}, out)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					held = append(held, req)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return held
	}
	for r := range 2 {
		held := round(r)
		if len(held) != limit {
			t.Fatalf("round %d: %d of %d concurrent requests admitted, want %d", r, len(held), callers, limit)
		}
		e.release(ls, held...)
	}
}

// testLeasePeekWithoutID checks that Peek and Reset of a concurrency limit
// need no lease id (the admin API inspects and resets keys without one).
func (s *suite) testLeasePeekWithoutID(t *testing.T) {
	e, _ := s.leaseEnv(t, alignedStart)
	p := concurrencyPolicy(t, 2, time.Second)
	if d := e.evaluate1(ratelimit.Request{Key: e.key("k"), Policy: p, Lease: "a"}); !d.Allowed {
		t.Fatal("first lease denied")
	}
	e.expect("Peek without a lease id", e.peek1(ratelimit.Request{Key: e.key("k"), Policy: p}),
		ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 1, Reset: time.Second})
	e.reset(ratelimit.Request{Key: e.key("k"), Policy: p})
	e.expect("Peek after Reset", e.peek1(ratelimit.Request{Key: e.key("k"), Policy: p}), ratelimit.Decision{Allowed: true, Limit: 2, Remaining: 2})
}
