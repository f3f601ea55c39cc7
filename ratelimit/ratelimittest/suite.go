// Package ratelimittest is the conformance suite every [ratelimit.Store]
// must pass before review.
//
// A store's test hands [Run] a [Factory] that builds a fresh store reading
// the clock it is given. The suite drives that clock (a
// [kit.ManualClock]) and checks three things:
//
//   - Timelines: exact decisions, row by row, for every algorithm on a
//     manual clock: bursts, continuous refill, window boundaries, costs above
//     one, remaining, reset, retry-after and shape-mode delays, from a start
//     time aligned to the windows and from one that is not.
//   - Contract: what [ratelimit.Store] promises beyond one limit: several
//     limits decide all-or-nothing, shadow limits never deny, Peek never
//     consumes, Reset restores, invalid costs are errors, keys are opaque,
//     and a clock that goes backwards never mints budget.
//   - Leases: for a [ratelimit.LeaseStore], the concurrency limits: exact
//     decisions on a timeline, renewal, release, expiry, the all-or-nothing
//     composition with rate limits, and racing callers.
//   - Properties: random request sequences (generated and shrunk by
//     pgregory.net/rapid) compared decision by decision with naive reference
//     models written here from docs/semantics.md §2, plus the invariants that hold whatever
//     the model: no more than C + r·T admitted over any T by the buckets and
//     gcra, no more than L per aligned window, no more than L in any sliding
//     log window, shape mode's output never faster than r. Last, every
//     Evaluate and Peek must equal [kit.StepAt] and [kit.PeekAt]
//     on the same state and time, so that one timeline gives the same
//     decisions on every store.
//
// A store's package runs it from a test:
//
//	func TestConformance(t *testing.T) {
//		ratelimittest.Run(t, func(t *testing.T, clock ratelimit.Clock) ratelimit.Store {
//			s, err := memory.New(memory.Options{Clock: clock})
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// Every subtest uses its own keys, so a store may be shared between subtests
// (a Redis store under test, for instance), as long as each Factory call
// returns a store whose clock is the one given.
//
// The bucket algorithms round their rate to a whole number of microseconds
// per unit (see [ratelimit.PolicyConfig.Rate]); the property tests use rates
// whose interval 1e6/rate is an integer, so that the models, which work in
// exact integer microseconds, describe the same limit.
package ratelimittest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// Factory returns a fresh, empty Store whose clock is clock (the suite drives
// a *kit.ManualClock). It may use t for Cleanup and for failing when
// the store cannot be built.
type Factory func(t *testing.T, clock ratelimit.Clock) ratelimit.Store

// Options tunes [RunWith].
type Options struct {
	// PropertyChecks is the number of random sequences each property test
	// tries; zero means 100. It cannot exceed rapid's -rapid.checks flag
	// (default 100). A store with a network round trip per call can lower it.
	PropertyChecks int
}

func (o Options) checks() int {
	if o.PropertyChecks <= 0 {
		return 100
	}
	return o.PropertyChecks
}

// Run runs the whole conformance suite (timelines, contract, properties)
// against stores from newStore, with default Options.
func Run(t *testing.T, newStore Factory) {
	t.Helper()
	RunWith(t, newStore, Options{})
}

// RunWith is Run with options.
func RunWith(t *testing.T, newStore Factory, o Options) {
	t.Helper()
	s := &suite{newStore: newStore, opts: o, nonce: fmt.Sprintf("rlt%x", nonceSeq.Add(1)+uint64(time.Now().UnixNano()))}
	t.Run("Timelines", s.runTimelines)
	t.Run("Contract", s.runContract)
	t.Run("Properties", s.runProperties)
	t.Run("Leases", s.runLeases)
}

// nonceSeq makes the key prefix of two RunWith calls in one process differ
// even within one clock tick.
var nonceSeq atomic.Uint64

// Start times. 1_764_000_000 s is a multiple of every window up to one hour;
// oddStart is 123.457 ms past it, aligned to no window of a millisecond or
// more.
var (
	alignedStart = time.Unix(1_764_000_000, 0)
	oddStart     = time.Unix(1_764_000_000, 123_457_000)
	bothStarts   = []time.Time{oddStart, alignedStart}
)

type suite struct {
	newStore Factory
	opts     Options
	nonce    string
}

// env is one subtest's store, clock and key space.
type env struct {
	t     *testing.T
	clock *kit.ManualClock
	store ratelimit.Store
	t0    time.Time
	keys  string
}

func (s *suite) newEnv(t *testing.T, t0 time.Time) *env {
	t.Helper()
	clock := kit.NewManualClock(t0)
	st := s.newStore(t, clock)
	if st == nil {
		t.Fatal("Factory returned a nil Store")
	}
	return &env{t: t, clock: clock, store: st, t0: t0, keys: s.nonce + "/" + t.Name() + "/"}
}

// key returns a key unique to this subtest (and this run).
func (e *env) key(name string) string { return e.keys + name }

// set moves the clock to t0+off.
func (e *env) set(off time.Duration) { e.clock.Set(e.t0.Add(off)) }

// when names the clock's reading relative to t0, as in "t0+300ms".
func (e *env) when() string {
	d := e.clock.Now().Sub(e.t0)
	if d < 0 {
		return "t0" + d.String()
	}
	return "t0+" + d.String()
}

func (e *env) evaluate(reqs ...ratelimit.Request) (bool, []ratelimit.Decision) {
	e.t.Helper()
	out := make([]ratelimit.Decision, len(reqs))
	ok, err := e.store.Evaluate(context.Background(), reqs, out)
	if err != nil {
		e.t.Fatalf("Evaluate(%s, %s): %v", e.when(), costs(reqs), err)
	}
	return ok, out
}

func (e *env) evaluate1(r ratelimit.Request) ratelimit.Decision {
	e.t.Helper()
	ok, out := e.evaluate(r)
	if ok != out[0].Allowed {
		e.t.Errorf("Evaluate(%s, cost %d) returned admitted=%v but Decision.Allowed=%v", e.when(), kit.Cost(r), ok, out[0].Allowed)
	}
	return out[0]
}

func (e *env) peek(reqs ...ratelimit.Request) []ratelimit.Decision {
	e.t.Helper()
	out := make([]ratelimit.Decision, len(reqs))
	if err := e.store.Peek(context.Background(), reqs, out); err != nil {
		e.t.Fatalf("Peek(%s, %s): %v", e.when(), costs(reqs), err)
	}
	return out
}

func (e *env) peek1(r ratelimit.Request) ratelimit.Decision {
	e.t.Helper()
	return e.peek(r)[0]
}

func (e *env) reset(reqs ...ratelimit.Request) {
	e.t.Helper()
	if err := e.store.Reset(context.Background(), reqs); err != nil {
		e.t.Fatalf("Reset(%s): %v", e.when(), err)
	}
}

func costs(reqs []ratelimit.Request) string {
	if len(reqs) == 1 {
		return fmt.Sprintf("cost %d", kit.Cost(reqs[0]))
	}
	parts := make([]string, len(reqs))
	for i, r := range reqs {
		parts[i] = fmt.Sprint(kit.Cost(r))
	}
	return "costs " + strings.Join(parts, ",")
}

func verdict(allowed bool) string {
	if allowed {
		return "allowed"
	}
	return "denied"
}

// diff reports every field in which got differs from want, naming the call,
// as in "Evaluate(t0+300ms, cost 2) = denied, want allowed".
func diff(call string, got, want ratelimit.Decision) []string {
	var d []string
	if got.Allowed != want.Allowed {
		d = append(d, fmt.Sprintf("%s = %s, want %s", call, verdict(got.Allowed), verdict(want.Allowed)))
	}
	field := func(name string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s: %s = %v, want %v", call, name, g, w))
		}
	}
	field("limit", got.Limit, want.Limit)
	field("remaining", got.Remaining, want.Remaining)
	field("reset", got.Reset, want.Reset)
	field("retry-after", got.RetryAfter, want.RetryAfter)
	field("delay", got.Delay, want.Delay)
	field("next", got.Next, want.Next)
	return d
}

func (e *env) expect(call string, got, want ratelimit.Decision) bool {
	e.t.Helper()
	d := diff(call, got, want)
	for _, line := range d {
		e.t.Error(line)
	}
	return len(d) == 0
}

// sane checks what holds for any decision whatever happened before.
func (e *env) sane(call string, p *ratelimit.Policy, d ratelimit.Decision) {
	e.t.Helper()
	switch {
	case d.Limit != p.Max():
		e.t.Errorf("%s: limit = %d, want %d", call, d.Limit, p.Max())
	case d.Remaining < 0 || d.Remaining > p.Max():
		e.t.Errorf("%s: remaining = %d, want 0..%d", call, d.Remaining, p.Max())
	case d.Reset < 0 || d.RetryAfter < 0 || d.Delay < 0:
		e.t.Errorf("%s: negative duration in %+v", call, d)
	case d.Allowed && d.RetryAfter != 0:
		e.t.Errorf("%s: allowed with retry-after %v", call, d.RetryAfter)
	case !d.Allowed && d.Delay != 0:
		e.t.Errorf("%s: denied with delay %v", call, d.Delay)
	}
}

func mustPolicy(t testing.TB, c ratelimit.PolicyConfig) *ratelimit.Policy {
	t.Helper()
	p, err := ratelimit.NewPolicy(c)
	if err != nil {
		t.Fatalf("NewPolicy(%+v): %v", c, err)
	}
	return p
}
