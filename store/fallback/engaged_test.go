package fallback

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// slow refills one unit every 100 s: what the fallback admits on it is owed
// for a long time after the breaker closes.
var slow = ratelimit.MustPolicy(ratelimit.PolicyConfig{
	Name: "slow", Algorithm: ratelimit.TokenBucket, Capacity: 3, Rate: 0.01,
})

// engagedLog records OnEngagedChange calls.
type engagedLog struct {
	mu    sync.Mutex
	calls []bool
}

func (l *engagedLog) install(o *Options) {
	o.OnEngagedChange = func(engaged bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.calls = append(l.calls, engaged)
	}
}

func (l *engagedLog) get() []bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// TestEngagedOwingKey: after an outage, the breaker is closed and the hold
// has passed, so nothing is decided locally and Engaged reads false. Then a
// key that owes what the fallback admitted is denied local-first, without
// asking the primary: every decision is local again, and Engaged must read
// true.
func TestEngagedOwingKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log engagedLog
		e := newEnv(t, log.install)
		e.trip(failing)
		for range 3 { // the fallback spends the whole budget of k
			if _, ok := e.allow("k", slow); !ok {
				t.Fatal("fallback denied within the budget")
			}
		}
		time.Sleep(pastOpen)
		e.primary.set(up)
		e.allow("other", bucket) // the probe closes the breaker
		time.Sleep(DefaultHold)
		synctest.Wait()
		if e.s.Active() || e.s.Engaged() {
			t.Fatalf("a hold after the last fallback decision: Active %v, Engaged %v; want false, false", e.s.Active(), e.s.Engaged())
		}
		if got := log.get(); !slices.Equal(got, []bool{true, false}) {
			t.Fatalf("OnEngagedChange calls %v, want [true false]", got)
		}
		calls0, _ := e.primary.stats()
		if _, ok := e.allow("k", slow); ok {
			t.Fatal("the owing key was admitted; want a local denial")
		}
		if calls, _ := e.primary.stats(); calls != calls0 {
			t.Fatalf("the primary was asked %d times for the owing key, want 0", calls-calls0)
		}
		if e.s.Active() {
			t.Error("Active = true with the breaker closed")
		}
		if !e.s.Engaged() {
			t.Error("Engaged = false while the only decision is local")
		}
		if got := log.get(); !slices.Equal(got, []bool{true, false, true}) {
			t.Errorf("OnEngagedChange calls %v, want [true false true]", got)
		}
	})
}

// TestEngagedDoesNotFlap: a breaker that opens and closes again and again,
// then owing keys denied locally now and then (each within a hold of the
// last), read as one stretch: a single true, and a single false a hold
// after the last decision made without the primary.
func TestEngagedDoesNotFlap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var log engagedLog
		e := newEnv(t, log.install)
		for round := range 5 {
			e.trip(failing) // opens the breaker
			if round == 0 {
				for range 3 {
					e.allow("k", slow) // k owes from now on
				}
			}
			time.Sleep(pastOpen)
			e.primary.set(up)
			e.allow("other", bucket) // the probe closes it
			if e.s.Active() {
				t.Fatalf("round %d: breaker still open after a successful probe", round)
			}
			time.Sleep(2 * time.Second)
		}
		for range 5 { // local-first denials, one every 6 s
			time.Sleep(6 * time.Second)
			if _, ok := e.allow("k", slow); ok {
				t.Fatal("the owing key was admitted; want a local denial")
			}
		}
		if got := log.get(); !slices.Equal(got, []bool{true}) {
			t.Fatalf("OnEngagedChange calls while decisions keep falling back %v, want [true]", got)
		}
		last := time.Now()
		time.Sleep(DefaultHold - time.Millisecond)
		synctest.Wait()
		if !e.s.Engaged() || len(log.get()) != 1 {
			t.Errorf("just within a hold of the last local decision: Engaged %v, calls %v; want true, [true]", e.s.Engaged(), log.get())
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if got := log.get(); !slices.Equal(got, []bool{true, false}) || e.s.Engaged() {
			t.Errorf("%v after the last local decision: calls %v, Engaged %v; want [true false], false", time.Since(last), got, e.s.Engaged())
		}
	})
}
