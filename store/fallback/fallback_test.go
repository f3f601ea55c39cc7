package fallback

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/ratelimittest"
)

// pastOpen is just past the default OpenTimeout: the breaker lets a probe
// through once its open period has strictly passed.
const pastOpen = DefaultOpenTimeout + time.Millisecond

func TestNewValidates(t *testing.T) {
	p := newFake(t, nil)
	l := newMemory(t, nil)
	tests := []struct {
		name string
		opts Options
		want []string // substrings of the error; none means valid
	}{
		{"defaults", Options{Primary: p, Local: l}, nil},
		{"allow without local", Options{Primary: p, Mode: Allow}, nil},
		{"deny without local", Options{Primary: p, Mode: Deny}, nil},
		{"open timeout 1s", Options{Primary: p, Local: l, OpenTimeout: time.Second}, nil},
		{"no primary", Options{Local: l}, []string{"primary store is required"}},
		{"local without local", Options{Primary: p, Mode: Local}, []string{"needs a local store"}},
		{"default mode without local", Options{Primary: p}, []string{"needs a local store"}},
		{"in-process local without local", Options{Primary: p, InProcess: true}, nil},
		{"unknown mode", Options{Primary: p, Mode: "open"}, []string{`unknown mode "open"`}},
		{"everything wrong", Options{
			Mode: "x", Timeout: -1, OpenTimeout: 2 * time.Second, ConsecutiveFailures: -1, MaxDebtKeys: -1,
		}, []string{"primary", `mode "x"`, "timeout must not be negative", "open timeout must be within 0..1s, got 2s",
			"consecutive failures", "max debt keys"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.opts)
			if len(tt.want) == 0 {
				if err != nil || s == nil {
					t.Fatalf("New = %v, want a store", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("New = nil error, want one mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("New error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestHealthyPrimaryDecides checks that while the primary works it alone
// decides, and the local store follows what it admitted.
func TestHealthyPrimaryDecides(t *testing.T) {
	e := newEnv(t, nil)
	for i := range 12 {
		d, ok := e.allow("k", bucket)
		if want := i < 10; ok != want || d.Allowed != want {
			t.Fatalf("request %d: allowed %v, want %v", i, ok, want)
		}
	}
	if calls, _ := e.primary.stats(); calls != 12 {
		t.Errorf("primary calls = %d, want 12", calls)
	}
	var out [1]ratelimit.Decision
	if err := e.local.Peek(context.Background(), []ratelimit.Request{{Key: "k", Policy: bucket}}, out[:]); err != nil {
		t.Fatal(err)
	}
	if out[0].Remaining != 0 {
		t.Errorf("local store remaining after 10 admitted on the primary = %d, want 0", out[0].Remaining)
	}
	if _, falls, states := e.hooks.snapshot(); len(falls) != 0 || len(states) != 0 || e.s.Active() {
		t.Errorf("fallbacks %v, state changes %v, active %v; want none", falls, states, e.s.Active())
	}
}

// TestBreakerOpens checks that ConsecutiveFailures failures in a row open
// the breaker, that every request still gets a local decision, and that
// once open the primary is not called.
func TestBreakerOpens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.primary.set(failing)
		for i := range 20 {
			if _, ok := e.allow(fmt.Sprint("k", i), bucket); !ok {
				t.Fatalf("request %d denied, want a local admission", i)
			}
			if want := i+1 >= DefaultConsecutiveFailures; e.s.Active() != want {
				t.Fatalf("after %d failures Active = %v, want %v", i+1, !want, want)
			}
		}
		if calls, _ := e.primary.stats(); calls != DefaultConsecutiveFailures {
			t.Errorf("primary calls = %d, want %d (none once open)", calls, DefaultConsecutiveFailures)
		}
		errs, falls, states := e.hooks.snapshot()
		if diff := testdiff.Diff(map[string]int{"other": DefaultConsecutiveFailures}, errs); diff != "" {
			t.Errorf("OnStoreError kinds (-want +got):\n%s", diff)
		}
		if diff := testdiff.Diff(map[Mode]int{Local: 20}, falls); diff != "" {
			t.Errorf("OnFallback (-want +got):\n%s", diff)
		}
		if diff := testdiff.Diff([]bool{true}, states); diff != "" {
			t.Errorf("OnStateChange (-want +got):\n%s", diff)
		}
	})
}

// TestBreakerSpuriousFailures checks that failures separated by successes
// never open the breaker.
func TestBreakerSpuriousFailures(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.ConsecutiveFailures = 3 })
	for i := range 30 {
		e.primary.set([]health{failing, failing, up}[i%3])
		e.allow(fmt.Sprint("k", i), bucket)
		if e.s.Active() {
			t.Fatalf("request %d: breaker open after two failures in a row, want closed", i)
		}
	}
}

// TestHalfOpenOneProbe checks that after OpenTimeout exactly one request
// probes the primary while concurrent ones get local decisions at once, and
// that the probe's success closes the breaker.
func TestHalfOpenOneProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.trip(failing)
		calls0, _ := e.primary.stats()
		time.Sleep(pastOpen)
		e.primary.set(gated) // the probe will wait inside the primary

		probeDone := make(chan bool)
		go func() {
			_, ok := e.allow("probe", bucket)
			probeDone <- ok
		}()
		synctest.Wait() // the probe is blocked in the primary

		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				start := time.Now()
				if _, ok := e.allow(fmt.Sprint("c", i), bucket); !ok {
					t.Errorf("concurrent request %d denied, want a local admission", i)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("concurrent request %d waited %v during the probe, want 0", i, d)
				}
			})
		}
		wg.Wait()
		calls, maxIn := e.primary.stats()
		if calls-calls0 != 1 || maxIn != 1 {
			t.Errorf("during half-open: %d primary calls, %d at most in flight; want 1 and 1", calls-calls0, maxIn)
		}
		if !e.s.Active() {
			t.Error("Active = false while the probe is in flight, want true")
		}
		e.primary.release()
		if !<-probeDone {
			t.Error("probe denied, want admitted")
		}
		if e.s.Active() {
			t.Error("Active = true after a successful probe, want false")
		}
		e.allow("after", bucket)
		if calls, _ := e.primary.stats(); calls-calls0 != 2 {
			t.Errorf("primary calls after recovery = %d, want 2", calls-calls0)
		}
		if _, _, states := e.hooks.snapshot(); !testdiff.Equal(states, []bool{true, false}) {
			t.Errorf("OnStateChange calls = %v, want [true false]", states)
		}
	})
}

// TestRecovery checks that a failed probe reopens the breaker and that a
// recovered primary decides again within OpenTimeout plus one request.
func TestRecovery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 10 * time.Millisecond
		e := newEnv(t, nil)
		e.trip(failing)
		time.Sleep(pastOpen)
		e.allow("probe", bucket) // fails: open again
		if !e.s.Active() {
			t.Fatal("Active = false after a failed probe, want true")
		}
		time.Sleep(DefaultOpenTimeout / 2)
		e.primary.set(up)
		recovered := time.Now()
		// Fresh keys: a key the fallback admitted for would be decided
		// local-first, and a local denial asks nothing of the primary.
		for i := 0; e.s.Active(); i++ {
			if time.Since(recovered) > time.Second {
				t.Fatal("not back on the primary 1s after it recovered")
			}
			time.Sleep(every)
			e.allow(fmt.Sprint("k", i), bucket)
		}
		back := time.Since(recovered)
		if max := DefaultOpenTimeout/2 + every; back > max {
			t.Errorf("back on the primary %v after it recovered, want ≤ %v", back, max)
		}
		t.Logf("back on the primary %v after recovery", back)
	})
}

// TestTimeoutBoundsCalls checks that a hung primary costs each request at
// most Timeout, and nothing once the breaker is open.
func TestTimeoutBoundsCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.Timeout = 20 * time.Millisecond })
		e.primary.set(hanging)
		for i := range 10 {
			start := time.Now()
			if _, ok := e.allow(fmt.Sprint("k", i), bucket); !ok {
				t.Fatalf("request %d denied, want a local admission", i)
			}
			took := time.Since(start)
			want := 20 * time.Millisecond
			if i >= DefaultConsecutiveFailures {
				want = 0
			}
			if took != want {
				t.Errorf("request %d took %v, want %v", i, took, want)
			}
		}
		if errs, _, _ := e.hooks.snapshot(); errs["timeout"] != DefaultConsecutiveFailures {
			t.Errorf("OnStoreError timeouts = %d, want %d", errs["timeout"], DefaultConsecutiveFailures)
		}
	})
}

// TestModes checks each mode's answers while the breaker is open and while
// a single call fails, with the hooks and readiness.
func TestModes(t *testing.T) {
	tests := []struct {
		mode      Mode
		wantOK    bool
		wantErr   error
		wantDec   ratelimit.Decision
		wantReady bool
	}{
		{Local, true, nil, ratelimit.Decision{Allowed: true, Limit: 10, Remaining: 9, Reset: 100 * time.Millisecond}, true},
		{Allow, true, nil, ratelimit.Decision{Allowed: true, Limit: 10, Remaining: 10, Uncounted: true}, true},
		{Deny, false, ErrUnavailable, ratelimit.Decision{}, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, func(o *Options) { o.Mode = tt.mode })
				if !e.s.Ready(context.Background()) {
					t.Error("Ready = false with the primary up, want true")
				}
				e.primary.set(failing)
				for i := range 2 * DefaultConsecutiveFailures {
					var out [1]ratelimit.Decision
					ok, err := e.s.Evaluate(context.Background(), []ratelimit.Request{{Key: fmt.Sprint("k", i), Policy: bucket}}, out[:])
					if ok != tt.wantOK || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
						t.Fatalf("request %d: Evaluate = %v, %v; want %v, %v", i, ok, err, tt.wantOK, tt.wantErr)
					}
					if err == nil && out[0] != tt.wantDec {
						t.Errorf("request %d: decision %+v, want %+v", i, out[0], tt.wantDec)
					}
				}
				if got := e.s.Ready(context.Background()); got != tt.wantReady {
					t.Errorf("Ready while open = %v, want %v", got, tt.wantReady)
				}
				_, falls, _ := e.hooks.snapshot()
				if diff := testdiff.Diff(map[Mode]int{tt.mode: 2 * DefaultConsecutiveFailures}, falls); diff != "" {
					t.Errorf("OnFallback (-want +got):\n%s", diff)
				}
				e.primary.set(up)
				time.Sleep(pastOpen)
				if _, ok := e.allow("after", bucket); !ok || e.s.Active() {
					t.Errorf("after recovery: allowed %v, active %v; want true, false", ok, e.s.Active())
				}
				if !e.s.Ready(context.Background()) {
					t.Error("Ready = false after recovery, want true")
				}
			})
		})
	}
}

// TestDenyReadyPings checks that in Deny mode with Ping, Ready probes the
// store itself: it opens the breaker on a store that is down at start with
// no traffic, and closes it again on recovery.
func TestDenyReadyPings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, func(o *Options) { o.Mode = Deny })
		e.s.ping = e.primary.ping
		e.primary.set(failing)
		for i := range DefaultConsecutiveFailures {
			if e.s.Ready(context.Background()) {
				t.Fatalf("Ready call %d = true with the store down, want false", i)
			}
		}
		if !e.s.Active() {
			t.Error("Active = false after failed pings, want true")
		}
		e.primary.set(up)
		if e.s.Ready(context.Background()) {
			t.Error("Ready = true while the breaker is open, want false")
		}
		time.Sleep(pastOpen)
		if !e.s.Ready(context.Background()) || e.s.Active() {
			t.Errorf("after OpenTimeout: Ready %v, Active %v; want true, false", !e.s.Active(), e.s.Active())
		}
	})
}

// TestNotStoreFailures checks that invalid requests, the caller's
// cancellation and errors Classify does not count pass through unchanged
// and never open the breaker.
func TestNotStoreFailures(t *testing.T) {
	errWrongType := errors.New("WRONGTYPE")
	e := newEnv(t, func(o *Options) {
		o.ConsecutiveFailures = 1
		o.Classify = func(err error) (string, bool) { return "other", err != errWrongType }
	})
	ctx := context.Background()
	var out [2]ratelimit.Decision

	_, err := e.s.Evaluate(ctx, []ratelimit.Request{{Key: "k", Policy: bucket, Cost: 11}}, out[:])
	if !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("Evaluate(cost 11) = %v, want ErrInvalidCost", err)
	}
	if err := e.s.Peek(ctx, []ratelimit.Request{{Key: "k", Policy: bucket, Cost: -1}}, out[:]); !errors.Is(err, ratelimit.ErrInvalidCost) {
		t.Errorf("Peek(cost -1) = %v, want ErrInvalidCost", err)
	}
	if calls, _ := e.primary.stats(); calls != 0 {
		t.Errorf("primary calls for invalid requests = %d, want 0", calls)
	}

	e.primary.set(hanging)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := e.s.Evaluate(cctx, []ratelimit.Request{{Key: "k", Policy: bucket}}, out[:]); err != context.Canceled {
		t.Errorf("Evaluate(canceled ctx) = %v, want context.Canceled itself", err)
	}

	e.primary.mu.Lock()
	e.primary.health = up
	e.primary.mu.Unlock()
	wrong := &errStore{fakeStore: e.primary, err: errWrongType}
	e.s.primary = wrong
	if _, err := e.s.Evaluate(ctx, []ratelimit.Request{{Key: "k", Policy: bucket}}, out[:]); err != errWrongType {
		t.Errorf("Evaluate with an error Classify does not count = %v, want it unchanged", err)
	}
	if e.s.Active() {
		t.Error("breaker open after errors that are not store failures, want closed")
	}
	if errs, falls, _ := e.hooks.snapshot(); len(errs) != 0 || len(falls) != 0 {
		t.Errorf("hooks: store errors %v, fallbacks %v; want none", errs, falls)
	}
}

// errStore answers every call with err.
type errStore struct {
	*fakeStore
	err error
}

func (s *errStore) Evaluate(context.Context, []ratelimit.Request, []ratelimit.Decision) (bool, error) {
	return false, s.err
}

// TestPeekAndReset checks Peek's fallback to the local store and that Reset
// reaches both stores and returns the primary's error.
func TestPeekAndReset(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		ctx := context.Background()
		req := []ratelimit.Request{{Key: "k", Policy: bucket}}
		for range 4 {
			e.allow("k", bucket)
		}
		var out [1]ratelimit.Decision
		if err := e.s.Peek(ctx, req, out[:]); err != nil || out[0].Remaining != 6 {
			t.Errorf("Peek = %+v, %v; want remaining 6", out[0], err)
		}
		e.primary.set(failing)
		e.primary.failReset = true
		if err := e.s.Peek(ctx, req, out[:]); err != nil || out[0].Remaining != 6 {
			t.Errorf("Peek with the primary down = %+v, %v; want the local state, remaining 6", out[0], err)
		}
		if err := e.s.Reset(ctx, req); !errors.Is(err, errRefused) {
			t.Errorf("Reset with the primary down = %v, want its error", err)
		}
		if err := e.s.Peek(ctx, req, out[:]); err != nil || out[0].Remaining != 10 {
			t.Errorf("Peek after Reset = %+v, %v; want the local state reset, remaining 10", out[0], err)
		}
		e.primary.set(up)
		if err := e.s.Reset(ctx, req); err != nil {
			t.Errorf("Reset = %v, want nil", err)
		}

		d := newEnv(t, func(o *Options) { o.Mode = Deny })
		d.primary.set(failing)
		if err := d.s.Peek(ctx, req, out[:]); !errors.Is(err, ErrUnavailable) {
			t.Errorf("Peek in deny mode with the primary down = %v, want ErrUnavailable", err)
		}
	})
}

// TestNoFreshBurstOnSwitch checks that a key exhausted on the primary stays
// exhausted on the fallback: the local store followed the primary.
func TestNoFreshBurstOnSwitch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		for range 10 {
			e.allow("k", bucket)
		}
		e.trip(failing)
		if d, ok := e.allow("k", bucket); ok {
			t.Errorf("first fallback decision on an exhausted key = %+v, want denied", d)
		}
	})
}

// TestOwingKey checks that a key the fallback admitted for is decided
// local-first after recovery, and by the primary alone once its local state
// is full again.
func TestOwingKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		e.trip(failing)
		for range 10 { // the fallback spends the whole budget
			if _, ok := e.allow("k", bucket); !ok {
				t.Fatal("fallback denied within the budget")
			}
		}
		time.Sleep(pastOpen) // 5 units refill on both stores
		e.primary.set(up)
		e.allow("other", bucket) // the probe closes the breaker
		calls0, _ := e.primary.stats()
		admitted := 0
		for range 10 {
			if _, ok := e.allow("k", bucket); ok {
				admitted++
			}
		}
		if admitted != 5 {
			t.Errorf("after recovery admitted %d of 10 on the owing key, want 5 (what refilled)", admitted)
		}
		if calls, _ := e.primary.stats(); calls-calls0 != 5 {
			t.Errorf("primary calls for the owing key = %d, want 5 (denials decided locally)", calls-calls0)
		}
		// Idle until the local bucket is full: the debt is forgiven.
		time.Sleep(time.Second + debtSweepInterval)
		e.allow("other", bucket) // sweeps
		if n := e.s.debts.len(); n != 0 {
			t.Errorf("debts after the local state refilled = %d, want 0", n)
		}
	})
}

// TestDebtCap checks that debts stay within MaxDebtKeys.
func TestDebtCap(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.MaxDebtKeys = debtShards })
	e.trip(failing)
	for i := range 200 {
		e.allow(fmt.Sprint("k", i), bucket)
	}
	if n, dropped := e.s.debts.len(), e.s.debts.dropped.Load(); n > debtShards || dropped == 0 {
		t.Errorf("debts %d (dropped %d) after 200 keys, want ≤ %d and some dropped", n, dropped, debtShards)
	}
}

// TestFlapping is docs/reliability.md row B11: the primary fails and recovers ten times
// while a client hammers one key; the total admitted stays within one burst
// plus rate·T, with no fresh burst or double spend per switch.
func TestFlapping(t *testing.T) {
	for _, h := range []health{failing, hanging} {
		t.Run(map[health]string{failing: "refused", hanging: "hung"}[h], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t, nil)
				const (
					cycle = time.Second
					down  = 300 * time.Millisecond
					tick  = 2 * time.Millisecond
				)
				start := time.Now()
				var admitted atomic.Int64
				stop := make(chan struct{})
				go func() { // the fault injector
					for range 10 {
						time.Sleep(cycle - down)
						e.primary.set(h)
						time.Sleep(down)
						e.primary.set(up)
					}
					close(stop)
				}()
				var wg sync.WaitGroup
				client := func(key func(i int) string) {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						var out [1]ratelimit.Decision
						k := key(i)
						ok, err := e.s.Evaluate(context.Background(), []ratelimit.Request{{Key: k, Policy: bucket}}, out[:])
						if err != nil {
							t.Errorf("Evaluate = %v", err)
							return
						}
						if ok && k == "hot" {
							admitted.Add(1)
						}
						time.Sleep(tick)
					}
				}
				for range 2 { // the hammering client, on two connections
					wg.Go(func() { client(func(int) string { return "hot" }) })
				}
				for c := range 2 { // background traffic on other keys
					wg.Go(func() { client(func(i int) string { return fmt.Sprint("bg", c, "-", i%50) }) })
				}
				wg.Wait()
				elapsed := time.Since(start)
				budget := 10 + int(10*elapsed.Seconds())
				_, falls, states := e.hooks.snapshot()
				n := int(admitted.Load())
				t.Logf("%v: admitted %d, budget %d (burst + rate·T), fallback decisions %d, breaker changes %d",
					elapsed, n, budget, falls[Local], len(states))
				if n > budget+1 {
					t.Errorf("admitted %d over %v, want ≤ %d (burst 10 + 10/s·T + 1)", n, elapsed, budget+1)
				}
				if n < budget*9/10 {
					t.Errorf("admitted %d over %v, want ≥ 90%% of %d (no undue denials)", n, elapsed, budget)
				}
				if falls[Local] == 0 || len(states) < 2 {
					t.Errorf("fallback decisions %d, breaker changes %d; want the fallback to have been used", falls[Local], len(states))
				}
			})
		})
	}
}

// TestManyLimitsFallback checks all-or-nothing on the fallback and the
// owing path with several limits, shadow ones included.
func TestManyLimitsFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, nil)
		reqs := []ratelimit.Request{{Key: "b", Policy: bucket}, {Key: "w", Policy: window}, {Key: "s", Policy: window, Shadow: true}}
		out := make([]ratelimit.Decision, 3)
		for range 3 {
			if ok, err := e.s.Evaluate(context.Background(), reqs, out); !ok || err != nil {
				t.Fatalf("Evaluate = %v, %v", ok, err)
			}
		}
		e.trip(failing)
		admitted := 0
		for range 5 {
			if ok, _ := e.s.Evaluate(context.Background(), reqs, out); ok {
				admitted++
			}
		}
		// The window allows 5 per second, 3 were admitted on the primary.
		if admitted != 2 {
			t.Errorf("fallback admitted %d, want 2 (window 5/s minus 3 recorded)", admitted)
		}
		if out[0].Remaining != 5 {
			t.Errorf("bucket remaining after a denied request = %d, want 5 (unchanged)", out[0].Remaining)
		}
	})
}

func TestConformance(t *testing.T) {
	t.Run("healthy primary", func(t *testing.T) {
		ratelimittest.Run(t, func(t *testing.T, clock ratelimit.Clock) ratelimit.Store {
			s, err := New(Options{Primary: newMemory(t, clock), Local: newMemory(t, clock), Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
	t.Run("dead primary", func(t *testing.T) {
		ratelimittest.Run(t, func(t *testing.T, clock ratelimit.Clock) ratelimit.Store {
			p := newFake(t, clock)
			p.set(failing) // Reset still works: the suite resets keys
			s, err := New(Options{Primary: p, Local: newMemory(t, clock), Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

func TestAddSaturating(t *testing.T) {
	now := time.Unix(1_764_000_000, 0).UnixNano()
	if got := addSaturating(now, 1); got != now+1000 {
		t.Errorf("addSaturating(now, 1µs) = now%+d, want now+1000", got-now)
	}
	if got := addSaturating(now, 1<<53); got != math.MaxInt64 {
		t.Errorf("addSaturating(now, 2^53µs) = %d, want MaxInt64", got)
	}
}

// boundedFake is a primary that says it bounds its own calls by bound, and
// records whether each Evaluate's context had a deadline.
type boundedFake struct {
	*fakeStore
	bound     time.Duration
	deadlines []bool
}

func (b *boundedFake) Timeout() time.Duration { return b.bound }

func (b *boundedFake) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	_, ok := ctx.Deadline()
	b.deadlines = append(b.deadlines, ok)
	return b.fakeStore.Evaluate(ctx, reqs, out)
}

// TestSelfBoundedPrimary checks that Evaluate adds no deadline of its own
// for a primary whose own bound is within Timeout, and adds one for any
// other primary, including one that bounds its calls by longer.
func TestSelfBoundedPrimary(t *testing.T) {
	for _, tc := range []struct {
		bound        time.Duration
		wantDeadline bool
	}{
		{bound: 50 * time.Millisecond, wantDeadline: false},
		{bound: 20 * time.Millisecond, wantDeadline: false},
		{bound: 51 * time.Millisecond, wantDeadline: true},
		{bound: 0, wantDeadline: true},
	} {
		t.Run(tc.bound.String(), func(t *testing.T) {
			p := &boundedFake{fakeStore: newFake(t, nil), bound: tc.bound}
			s, err := New(Options{Primary: p, Local: newMemory(t, nil), Timeout: 50 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			var out [1]ratelimit.Decision
			for range 2 {
				if ok, err := s.Evaluate(context.Background(), []ratelimit.Request{{Key: "k", Policy: bucket}}, out[:]); err != nil || !ok {
					t.Fatalf("Evaluate = %v, %v; want an admission", ok, err)
				}
			}
			for i, got := range p.deadlines {
				if got != tc.wantDeadline {
					t.Errorf("call %d: the primary's context has a deadline: %v, want %v", i, got, tc.wantDeadline)
				}
			}
		})
	}
}
