package fallback

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// errRefused stands for a store that cannot be reached.
var errRefused = errors.New("fake store: connection refused")

// health is what a fakeStore does with the next call.
type health int

const (
	up      health = iota // answer from the inner store
	failing               // return errRefused at once
	hanging               // block until the call's context is done
	gated                 // block until release is called (or ctx done), then answer
)

// fakeStore is a primary that fails on demand. It decides with an inner
// memory store while up, and counts calls and the most in flight at once.
type fakeStore struct {
	inner *memory.Store

	mu          sync.Mutex
	health      health
	gate        chan struct{}
	failReset   bool
	calls       int
	inFlight    int
	maxInFlight int
}

func newFake(t testing.TB, clock ratelimit.Clock) *fakeStore {
	t.Helper()
	return &fakeStore{inner: newMemory(t, clock)}
}

func newMemory(t testing.TB, clock ratelimit.Clock) *memory.Store {
	t.Helper()
	m, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		t.Fatalf("memory.New: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func (f *fakeStore) set(h health) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.health = h
	if h == gated {
		f.gate = make(chan struct{})
	}
}

// release lets the calls blocked by gated through, and the store is up.
func (f *fakeStore) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	close(f.gate)
	f.health = up
}

// stats returns the calls made and the most ever in flight at once.
func (f *fakeStore) stats() (calls, maxInFlight int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls, f.maxInFlight
}

// enter counts a call and waits or fails as the store's health says.
func (f *fakeStore) enter(ctx context.Context) error {
	f.mu.Lock()
	f.calls++
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	h, gate := f.health, f.gate
	f.mu.Unlock()
	var err error
	switch h {
	case failing:
		err = errRefused
	case hanging:
		<-ctx.Done()
		err = ctx.Err()
	case gated:
		select {
		case <-gate:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	if err != nil {
		f.leave()
	}
	return err
}

func (f *fakeStore) leave() {
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
}

func (f *fakeStore) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	if err := f.enter(ctx); err != nil {
		return false, err
	}
	defer f.leave()
	return f.inner.Evaluate(ctx, reqs, out)
}

func (f *fakeStore) Peek(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	if err := f.enter(ctx); err != nil {
		return err
	}
	defer f.leave()
	return f.inner.Peek(ctx, reqs, out)
}

func (f *fakeStore) Reset(ctx context.Context, reqs []ratelimit.Request) error {
	f.mu.Lock()
	failReset := f.failReset
	f.mu.Unlock()
	if failReset {
		if err := f.enter(ctx); err != nil {
			return err
		}
		f.leave()
	}
	return f.inner.Reset(ctx, reqs)
}

// ping is an Options.Ping for the fake.
func (f *fakeStore) ping(ctx context.Context) error {
	if err := f.enter(ctx); err != nil {
		return err
	}
	f.leave()
	return nil
}

// hooks counts the calls of every hook.
type hooks struct {
	mu        sync.Mutex
	errors    map[string]int
	fallbacks map[Mode]int
	states    []bool
}

func (h *hooks) install(o *Options) {
	h.errors = map[string]int{}
	h.fallbacks = map[Mode]int{}
	o.OnStoreError = func(_ context.Context, kind string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.errors[kind]++
	}
	o.OnFallback = func(_ context.Context, m Mode) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.fallbacks[m]++
	}
	o.OnStateChange = func(active bool) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.states = append(h.states, active)
	}
}

func (h *hooks) snapshot() (errs map[string]int, falls map[Mode]int, states []bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	errs, falls = map[string]int{}, map[Mode]int{}
	for k, v := range h.errors {
		errs[k] = v
	}
	for k, v := range h.fallbacks {
		falls[k] = v
	}
	return errs, falls, append([]bool(nil), h.states...)
}

// bucket is a token bucket of capacity 10 refilling 10 per second.
var bucket = ratelimit.MustPolicy(ratelimit.PolicyConfig{
	Name: "bucket", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 10,
})

// window is a fixed window of 5 per second.
var window = ratelimit.MustPolicy(ratelimit.PolicyConfig{
	Name: "window", Algorithm: ratelimit.FixedWindow, Limit: 5, Window: time.Second,
})

// env is a Store under test with its fake primary, its local store and its
// hooks.
type env struct {
	t       *testing.T
	s       *Store
	primary *fakeStore
	local   *memory.Store
	hooks   *hooks
}

// newEnv builds a Store on a fresh fake primary and memory store, both on
// the system clock (fake inside a synctest bubble). edit may change the
// Options before New.
func newEnv(t *testing.T, edit func(*Options)) *env {
	t.Helper()
	e := &env{t: t, primary: newFake(t, nil), local: newMemory(t, nil), hooks: &hooks{}}
	o := Options{Primary: e.primary, Local: e.local}
	e.hooks.install(&o)
	if edit != nil {
		edit(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	e.s = s
	return e
}

// allow evaluates one unit of key under p and fails the test on an error.
func (e *env) allow(key string, p *ratelimit.Policy) (ratelimit.Decision, bool) {
	e.t.Helper()
	var out [1]ratelimit.Decision
	ok, err := e.s.Evaluate(context.Background(), []ratelimit.Request{{Key: key, Policy: p}}, out[:])
	if err != nil {
		e.t.Fatalf("Evaluate(%s) = %v, want no error", key, err)
	}
	return out[0], ok
}

// trip makes the primary fail and sends requests until the breaker opens.
func (e *env) trip(h health) {
	e.t.Helper()
	e.primary.set(h)
	for i := 0; !e.s.Active(); i++ {
		if i > 100 {
			e.t.Fatal("breaker still closed after 100 failing requests")
		}
		e.allow("trip", bucket)
	}
}
