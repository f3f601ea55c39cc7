package localdeny

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// counting is an inner store that counts the calls that reach it.
type counting struct {
	ratelimit.Store
	evals  atomic.Int64
	resets atomic.Int64
	// during, if set, runs inside Evaluate after the inner store decided.
	during func()
}

func (c *counting) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	c.evals.Add(1)
	ok, err := c.Store.Evaluate(ctx, reqs, out)
	if c.during != nil {
		c.during()
	}
	return ok, err
}

func (c *counting) Reset(ctx context.Context, reqs []ratelimit.Request) error {
	c.resets.Add(1)
	return c.Store.Reset(ctx, reqs)
}

// env is a Store over a counting memory store, both on one manual clock.
type env struct {
	clock *kit.ManualClock
	mem   *memory.Store
	inner *counting
	s     *Store
	local atomic.Int64 // requests answered locally (OnLocal)
}

func newEnv(t testing.TB, opts Options) *env {
	t.Helper()
	e := &env{clock: kit.NewManualClock(time.Unix(1_700_000_000, 0))}
	mem, err := memory.New(memory.Options{Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mem.Close() })
	e.mem, e.inner = mem, &counting{Store: mem}
	opts.Store, opts.Clock = e.inner, e.clock
	if opts.OnLocal == nil {
		opts.OnLocal = func(context.Context) { e.local.Add(1) }
	}
	if e.s, err = New(opts); err != nil {
		t.Fatal(err)
	}
	return e
}

// eval evaluates reqs on the Store and returns the verdict and decisions.
func (e *env) eval(t testing.TB, reqs ...ratelimit.Request) (bool, []ratelimit.Decision) {
	t.Helper()
	out := make([]ratelimit.Decision, len(reqs))
	ok, err := e.s.Evaluate(context.Background(), reqs, out)
	if err != nil {
		t.Fatalf("Evaluate: %v", err)
	}
	return ok, out
}

// calls checks that the inner store has been asked want times so far.
func (e *env) calls(t testing.TB, want int64) {
	t.Helper()
	if got := e.inner.evals.Load(); got != want {
		t.Fatalf("inner store asked %d times, want %d", got, want)
	}
}

var (
	// tight: 2 units, one more per second.
	tight = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "tight", Algorithm: ratelimit.TokenBucket, Capacity: 2, Rate: 1})
	// five: 5 units, one more per second.
	five = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "five", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 1})
	// roomy admits everything these tests send.
	roomy = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "roomy", Algorithm: ratelimit.TokenBucket, Capacity: 1000, Rate: 1000})
)

// TestDeniedKeyAnsweredLocallyUntilT: once the store denies a key until T,
// the key's requests do not reach the store before T; they are denied with
// the remaining RetryAfter; the first one at T reaches the store again.
func TestDeniedKeyAnsweredLocallyUntilT(t *testing.T) {
	e := newEnv(t, Options{})
	u := ratelimit.Request{Key: "u", Policy: tight}
	e.eval(t, u)
	e.eval(t, u)
	e.clock.Advance(300 * time.Millisecond)
	ok, out := e.eval(t, u)
	if ok || out[0].RetryAfter != 700*time.Millisecond {
		t.Fatalf("third request: admitted %v, %+v; want denied, RetryAfter 700ms", ok, out[0])
	}
	e.calls(t, 3)
	if e.s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", e.s.Len())
	}
	for i := 1; i <= 6; i++ {
		e.clock.Advance(100 * time.Millisecond)
		ok, out := e.eval(t, u)
		want := ratelimit.Decision{Limit: 2, Remaining: 0, RetryAfter: time.Duration(700-100*i) * time.Millisecond,
			Reset: time.Duration(1700-100*i) * time.Millisecond, Next: time.Duration(700-100*i) * time.Millisecond}
		if ok || out[0] != want {
			t.Fatalf("request %d within T: admitted %v, %+v; want %+v", i, ok, out[0], want)
		}
	}
	e.calls(t, 3)
	if got := e.local.Load(); got != 6 {
		t.Fatalf("OnLocal called %d times, want 6", got)
	}
	e.clock.Advance(100 * time.Millisecond) // T
	if ok, _ := e.eval(t, u); !ok {
		t.Fatal("request at T denied, want admitted by the store")
	}
	e.calls(t, 4)
	if e.s.Len() != 0 {
		t.Fatalf("Len = %d after T, want 0 (dropped on lookup)", e.s.Len())
	}
}

// TestSmallerCostGoesToStore: a denial for cost c answers requests of cost
// c or more; a smaller cost is asked of the store, which may admit it.
func TestSmallerCostGoesToStore(t *testing.T) {
	e := newEnv(t, Options{})
	u := func(cost int64) ratelimit.Request { return ratelimit.Request{Key: "u", Policy: five, Cost: cost} }
	e.eval(t, u(4))
	if ok, _ := e.eval(t, u(3)); ok {
		t.Fatal("cost 3 with 1 unit left admitted")
	}
	e.calls(t, 2)
	if ok, out := e.eval(t, u(5)); ok || out[0].RetryAfter != 2*time.Second || out[0].Remaining != 1 {
		t.Fatalf("cost 5 after cost 3 denied: admitted %v, %+v; want denied locally, RetryAfter 2s, Remaining 1", ok, out[0])
	}
	e.calls(t, 2)
	if ok, _ := e.eval(t, u(1)); !ok {
		t.Fatal("cost 1 with 1 unit left denied")
	}
	e.calls(t, 3)
	if _, _ = e.eval(t, u(3)); e.inner.evals.Load() != 3 {
		t.Fatal("cost 3 again reached the store")
	}
}

// TestShadowNeverRemembered: a shadow limit that would deny creates no
// entry, and a shadow limit on a key remembered denied is not answered here.
func TestShadowNeverRemembered(t *testing.T) {
	e := newEnv(t, Options{})
	sh := ratelimit.Request{Key: "s", Policy: tight, Shadow: true}
	for range 4 {
		if ok, _ := e.eval(t, sh); !ok {
			t.Fatal("a request with only a shadow limit denied")
		}
	}
	e.calls(t, 4)
	if e.s.Len() != 0 {
		t.Fatalf("Len = %d after shadow denials, want 0", e.s.Len())
	}
	// The same key enforced: denied by the store, then remembered.
	enforced := ratelimit.Request{Key: "s", Policy: tight}
	if ok, _ := e.eval(t, enforced); ok {
		t.Fatal("exhausted key admitted")
	}
	e.eval(t, enforced)
	e.calls(t, 5)
	// As a shadow limit it still goes to the store.
	if ok, _ := e.eval(t, sh); !ok {
		t.Fatal("shadow request denied")
	}
	e.calls(t, 6)
	// A shadow limit that would deny, in a request another limit denies:
	// only the enforced limit is remembered.
	s2 := ratelimit.Request{Key: "s2", Policy: tight, Shadow: true, Cost: 2}
	e.eval(t, s2) // admitted, consumes the shadow limit's 2 units
	x := ratelimit.Request{Key: "x", Policy: tight}
	e.eval(t, x)
	e.eval(t, x)
	if ok, out := e.eval(t, x, s2); ok || out[1].Allowed {
		t.Fatalf("want both limits denying: admitted %v, %+v", ok, out)
	}
	e.calls(t, 10)
	if e.s.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (s and x)", e.s.Len())
	}
	if ok, _ := e.eval(t, ratelimit.Request{Key: "s2", Policy: tight, Cost: 2}); ok {
		t.Fatal("exhausted s2 admitted")
	}
	e.calls(t, 11)
}

// TestMultiLimitConsumesNothing: a request whose one limit is remembered
// denied consumes nothing from its other limits; those are answered
// Uncounted, so headers describe the denying limit only.
func TestMultiLimitConsumesNothing(t *testing.T) {
	e := newEnv(t, Options{})
	a := ratelimit.Request{Key: "a", Policy: tight}
	b := ratelimit.Request{Key: "b", Policy: roomy, Cost: 7}
	e.eval(t, a)
	e.eval(t, a)
	if ok, out := e.eval(t, b, a); ok || !out[0].Allowed || out[0].Uncounted || out[1].Allowed {
		t.Fatalf("store's answer: admitted %v, %+v", ok, out)
	}
	e.calls(t, 3)
	for range 10 {
		ok, out := e.eval(t, b, a)
		if ok || out[1].Allowed || out[1].Uncounted || out[1].RetryAfter != time.Second {
			t.Fatalf("local answer: admitted %v, %+v; want a denied by a", ok, out)
		}
		if want := (ratelimit.Decision{Allowed: true, Limit: 1000, Remaining: 1000, Uncounted: true}); out[0] != want {
			t.Fatalf("other limit answered %+v, want %+v", out[0], want)
		}
	}
	e.calls(t, 3)
	var peek [1]ratelimit.Decision
	if err := e.mem.Peek(context.Background(), []ratelimit.Request{b}, peek[:]); err != nil {
		t.Fatal(err)
	}
	if peek[0].Remaining != 1000 {
		t.Fatalf("b's Remaining = %d after denied requests, want 1000 (nothing consumed)", peek[0].Remaining)
	}
	// Both limits remembered: both denials are derived, the longer wins in headers.
	c := ratelimit.Request{Key: "c", Policy: five, Cost: 5}
	e.eval(t, ratelimit.Request{Key: "c", Policy: five, Cost: 3})
	if ok, _ := e.eval(t, c); ok {
		t.Fatal("c admitted with 2 left")
	}
	e.calls(t, 5)
	ok, out := e.eval(t, a, c)
	if ok || out[0].Allowed || out[1].Allowed || out[0].Uncounted || out[1].Uncounted || out[1].RetryAfter != 3*time.Second {
		t.Fatalf("two remembered limits: admitted %v, %+v", ok, out)
	}
	e.calls(t, 5)
}

// TestPolicyChangeEscapes: a request on a remembered key under another
// policy (an override, a plan, a reload's new policy) goes to the store.
func TestPolicyChangeEscapes(t *testing.T) {
	e := newEnv(t, Options{})
	u := ratelimit.Request{Key: "u", Policy: tight}
	e.eval(t, u)
	e.eval(t, u)
	e.eval(t, u)
	e.calls(t, 3)
	reloaded := ratelimit.MustPolicy(tight.Config())
	if ok, _ := e.eval(t, ratelimit.Request{Key: "u", Policy: reloaded}); ok {
		t.Fatal("the same budget under an equal policy admitted")
	}
	e.calls(t, 4)
}

// TestRepeatedKeyNotRemembered: a key that occurs twice in one request is
// decided against the state its first occurrence left; its denial says
// nothing about a request that names it once.
func TestRepeatedKeyNotRemembered(t *testing.T) {
	e := newEnv(t, Options{})
	u := ratelimit.Request{Key: "u", Policy: five, Cost: 3}
	if ok, out := e.eval(t, u, u); ok || out[1].Allowed {
		t.Fatalf("3+3 of 5 admitted: %+v", out)
	}
	if e.s.Len() != 0 {
		t.Fatalf("Len = %d, want 0", e.s.Len())
	}
	if ok, _ := e.eval(t, u); !ok {
		t.Fatal("cost 3 of 5 denied")
	}
	e.calls(t, 2)
}

// TestSkip: while Options.Skip says so, denials are not remembered.
func TestSkip(t *testing.T) {
	var skip atomic.Bool
	skip.Store(true)
	e := newEnv(t, Options{Skip: skip.Load})
	u := ratelimit.Request{Key: "u", Policy: tight}
	for range 5 {
		e.eval(t, u)
	}
	e.calls(t, 5)
	skip.Store(false)
	e.eval(t, u)
	e.eval(t, u)
	e.calls(t, 6)
}

// TestInvalidRequestNotAnswered: a request the store would refuse as
// invalid gets the store's error even when its key is remembered denied.
func TestInvalidRequestNotAnswered(t *testing.T) {
	e := newEnv(t, Options{})
	u := ratelimit.Request{Key: "u", Policy: tight}
	e.eval(t, u)
	e.eval(t, u)
	e.eval(t, u)
	var out [1]ratelimit.Decision
	_, err := e.s.Evaluate(context.Background(), []ratelimit.Request{{Key: "u", Policy: tight, Cost: 3}}, out[:])
	if !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Fatalf("cost 3 of 2: err %v, want ErrInvalidCost", err)
	}
	if _, err := e.s.Evaluate(context.Background(), []ratelimit.Request{u}, nil); err == nil {
		t.Fatal("no room in out: no error")
	}
}

// TestResetForgets: Reset clears the key here and on the store, so the
// next request is admitted; a denial reported to a call in flight across
// the reset is not remembered.
func TestResetForgets(t *testing.T) {
	e := newEnv(t, Options{})
	u := ratelimit.Request{Key: "u", Policy: tight}
	for range 3 {
		e.eval(t, u)
	}
	if e.s.Len() != 1 {
		t.Fatalf("Len = %d, want 1", e.s.Len())
	}
	if err := e.s.Reset(context.Background(), []ratelimit.Request{u}); err != nil {
		t.Fatal(err)
	}
	if e.s.Len() != 0 || e.inner.resets.Load() != 1 {
		t.Fatalf("after Reset: Len %d, inner resets %d; want 0, 1", e.s.Len(), e.inner.resets.Load())
	}
	if ok, _ := e.eval(t, u); !ok {
		t.Fatal("first request after Reset denied")
	}
	e.calls(t, 4)

	// In flight: the store denies, then a reset runs before the denial is
	// remembered.
	e.eval(t, u)
	e.inner.during = func() {
		e.inner.during = nil
		if err := e.s.Reset(context.Background(), []ratelimit.Request{u}); err != nil {
			t.Error(err)
		}
	}
	if ok, _ := e.eval(t, u); ok {
		t.Fatal("exhausted key admitted")
	}
	if e.s.Len() != 0 {
		t.Fatal("a denial seen before a reset was remembered after it")
	}
	if ok, _ := e.eval(t, u); !ok {
		t.Fatal("request after the reset denied")
	}
}

// TestOverView: a view answers from the shared entries with its own inner
// store and hook, and its Reset forgets in the shared table.
func TestOverView(t *testing.T) {
	e := newEnv(t, Options{})
	other := &counting{Store: e.mem}
	var hits atomic.Int64
	v := e.s.Over(other, func(context.Context) { hits.Add(1) })
	u := ratelimit.Request{Key: "u", Policy: tight}
	out := make([]ratelimit.Decision, 1)
	for range 3 {
		if _, err := v.Evaluate(context.Background(), []ratelimit.Request{u}, out); err != nil {
			t.Fatal(err)
		}
	}
	if other.evals.Load() != 3 || e.inner.evals.Load() != 0 || e.s.Len() != 1 {
		t.Fatalf("view asked %d, Store's inner %d, Len %d; want 3, 0, 1", other.evals.Load(), e.inner.evals.Load(), e.s.Len())
	}
	e.eval(t, u) // remembered by the view, answered by the Store
	e.calls(t, 0)
	if _, err := v.Evaluate(context.Background(), []ratelimit.Request{u}, out); err != nil || out[0].Allowed {
		t.Fatalf("view: %+v, %v", out[0], err)
	}
	if hits.Load() != 1 || e.local.Load() != 1 {
		t.Fatalf("view hook %d, Store hook %d; want 1 each", hits.Load(), e.local.Load())
	}
	if err := v.Reset(context.Background(), []ratelimit.Request{u}); err != nil {
		t.Fatal(err)
	}
	if e.s.Len() != 0 || other.resets.Load() != 1 {
		t.Fatalf("view Reset: Len %d, view inner resets %d", e.s.Len(), other.resets.Load())
	}
	if err := v.Peek(context.Background(), []ratelimit.Request{u}, out); err != nil || out[0].Remaining != 2 {
		t.Fatalf("view Peek: %+v, %v", out[0], err)
	}
}

// TestMaxKeys: no more than MaxKeys keys are remembered, whatever the
// number denied; a full shard gives room to the newest denial.
func TestMaxKeys(t *testing.T) {
	for _, maxKeys := range []int{1, 64, 130} {
		t.Run(fmt.Sprint(maxKeys), func(t *testing.T) {
			e := newEnv(t, Options{MaxKeys: maxKeys})
			for i := range 2000 {
				u := ratelimit.Request{Key: fmt.Sprint("k", i), Policy: tight, Cost: 2}
				e.eval(t, u)
				e.eval(t, u)
				if n := e.s.Len(); n > maxKeys {
					t.Fatalf("Len = %d after %d keys, above MaxKeys %d", n, i+1, maxKeys)
				}
			}
			if n := e.s.Len(); n < maxKeys*3/4 {
				t.Errorf("Len = %d after 2000 denied keys, want close to MaxKeys %d", n, maxKeys)
			}
			// The key denied last is remembered (room was made for it),
			// unless its shard holds nothing.
			last := ratelimit.Request{Key: "k1999", Policy: tight, Cost: 2}
			_, sh := e.s.digest(last.Key)
			before := e.inner.evals.Load()
			e.eval(t, last)
			if remembered := e.inner.evals.Load() == before; remembered != (sh.cap > 0) {
				t.Errorf("last denied key remembered %v, its shard's cap %d", remembered, sh.cap)
			}
		})
	}
}

// TestExpiredEntriesSwept: expired entries leave the table without being
// looked up again, one shard per sweep interval's 64th.
func TestExpiredEntriesSwept(t *testing.T) {
	e := newEnv(t, Options{SweepInterval: 64 * time.Millisecond})
	for i := range 500 {
		u := ratelimit.Request{Key: fmt.Sprint("k", i), Policy: tight, Cost: 2}
		e.eval(t, u)
		e.eval(t, u)
	}
	if e.s.Len() != 500 {
		t.Fatalf("Len = %d, want 500", e.s.Len())
	}
	e.clock.Advance(2 * time.Second) // past every T
	other := ratelimit.Request{Key: "other", Policy: roomy}
	for range numShards {
		e.clock.Advance(time.Millisecond)
		e.eval(t, other)
	}
	if n := e.s.Len(); n != 0 {
		t.Fatalf("Len = %d after a sweep of every shard, want 0", n)
	}
	// Once empty, nothing is looked up or swept.
	e.eval(t, other)
}

// TestHugeRetryAfter: a denial for centuries saturates instead of
// overflowing, and is still answered locally.
func TestHugeRetryAfter(t *testing.T) {
	slow := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "slow", Algorithm: ratelimit.TokenBucket, Capacity: ratelimit.MaxAmount, Rate: ratelimit.MinRate})
	e := newEnv(t, Options{})
	e.clock.Advance(1000 * time.Hour)
	u := ratelimit.Request{Key: "u", Policy: slow, Cost: ratelimit.MaxAmount}
	e.eval(t, u)
	ok, out := e.eval(t, u)
	if ok || out[0].RetryAfter <= 0 {
		t.Fatalf("store: %v %+v", ok, out[0])
	}
	ok, local := e.eval(t, u)
	if ok || local[0].RetryAfter <= 0 || local[0].RetryAfter > out[0].RetryAfter {
		t.Fatalf("local: %v %+v after store's %+v", ok, local[0], out[0])
	}
	e.calls(t, 2)
}

func TestNewRefusesBadOptions(t *testing.T) {
	_, err := New(Options{MaxKeys: -1, SweepInterval: -time.Second})
	for _, want := range []string{"a store to wrap is required", "max keys must not be negative, got -1", "sweep interval must not be negative, got -1s"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New: %v; want it to say %q", err, want)
		}
	}
}

// TestConcurrentExact: many goroutines on a few keys, with resets: the
// total admitted per key is exactly what the store alone admits (the
// budget, refilling only by resets), and the store is asked less often.
func TestConcurrentExact(t *testing.T) {
	frozen := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "frozen", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: ratelimit.MinRate})
	mem, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	inner := &counting{Store: mem}
	// 16 keys per shard: with MaxKeys 64 each of the 64 shards holds one,
	// and two of the 4 keys sharing a shard (one run in 11, the hash being
	// seeded per store) would evict each other and send half the requests
	// to the store.
	s, err := New(Options{Store: inner, MaxKeys: 1024})
	if err != nil {
		t.Fatal(err)
	}
	const keys, workers, each = 4, 8, 2000
	var admitted [keys]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			out := make([]ratelimit.Decision, 2)
			for i := range each {
				k := (w + i) % keys
				reqs := []ratelimit.Request{{Key: fmt.Sprint("k", k), Policy: frozen}, {Key: "all", Policy: roomy, Shadow: true}}
				ok, err := s.Evaluate(context.Background(), reqs, out)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					admitted[k].Add(1)
				}
			}
		})
	}
	wg.Wait()
	for k := range keys {
		if n := admitted[k].Load(); n != 10 {
			t.Errorf("key %d: %d admitted, want 10", k, n)
		}
	}
	if n := inner.evals.Load(); n >= workers*each/2 {
		t.Errorf("the store was asked %d times for %d requests", n, workers*each)
	}
	// With resets racing: never more than 10 admitted between two resets'
	// budgets, counted as 10 per reset plus the first.
	var resets atomic.Int64
	var total atomic.Int64
	done := make(chan struct{})
	var rg sync.WaitGroup
	rg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := s.Reset(context.Background(), []ratelimit.Request{{Key: "r", Policy: frozen}}); err != nil {
				t.Error(err)
			}
			resets.Add(1)
			time.Sleep(100 * time.Microsecond)
		}
	})
	for range workers {
		wg.Go(func() {
			out := make([]ratelimit.Decision, 1)
			for range each {
				ok, err := s.Evaluate(context.Background(), []ratelimit.Request{{Key: "r", Policy: frozen}}, out)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					total.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(done)
	rg.Wait()
	if max := 10 * (resets.Load() + 1); total.Load() > max {
		t.Errorf("%d admitted across %d resets, more than %d", total.Load(), resets.Load(), max)
	}
}
