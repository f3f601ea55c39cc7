package httplimit

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
)

// sameVerdicts reports whether a and b hold the same verdicts: the same
// policy pointers, an empty key equal to a nil one, every other field deeply
// equal; a nil list equals an empty one.
func sameVerdicts(a, b []Verdict) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Policy != y.Policy {
			return false
		}
		x.Policy, y.Policy = nil, nil
		if len(x.Key) == 0 && len(y.Key) == 0 {
			x.Key, y.Key = nil, nil
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// goneWatcher is a ClientWatcher whose client has already left; stopped
// counts the calls of stop.
type goneWatcher struct{ stopped int }

func (w *goneWatcher) WatchClient() (<-chan struct{}, func()) {
	gone := make(chan struct{})
	close(gone)
	return gone, func() { w.stopped++ }
}

// TestEvaluatedSettle: the step the middleware and the rate limit service
// share turns one store call into the answer, the verdicts, the outcome
// and the shape-mode hold.
func TestEvaluatedSettle(t *testing.T) {
	slots := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 2, LeaseTTL: time.Minute})
	req := func(p *ratelimit.Policy, cost int64, shadow bool) ratelimit.Request {
		return ratelimit.Request{Key: "k-" + p.Name(), Policy: p, Cost: cost, Shadow: shadow}
	}
	allowed := func(limit, remaining int64, delay time.Duration) ratelimit.Decision {
		return ratelimit.Decision{Allowed: true, Limit: limit, Remaining: remaining, Reset: time.Second, Delay: delay}
	}
	denied := func(limit int64, retry time.Duration) ratelimit.Decision {
		return ratelimit.Decision{Limit: limit, Reset: retry, RetryAfter: retry, Next: retry}
	}
	user := func(anon bool) Verdict { return Verdict{LimitID: "user", Key: []string{"u1"}, Anonymous: anon} }
	global := Verdict{LimitID: "global", Key: []string{"all"}}
	storeDown := errors.New("store down")

	tests := []struct {
		name     string
		e        Evaluated
		cancel   bool // ctx has ended before Settle
		watch    bool // a ClientWatcher whose client has left
		outcome  Outcome
		forward  bool
		status   int
		retry    int64
		violated []string // of the problem body; nil: no body
		delay    time.Duration
		held     time.Duration // how long Settle took, on fake time
		verdicts []Verdict
		headers  bool
		leases   int // left in res for Hold
	}{{
		name: "admitted",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(perUser, 1, false), req(hourly, 1, false)},
			Decisions: []ratelimit.Decision{allowed(10, 9, 0), allowed(100, 99, 0)},
			Verdicts:  []Verdict{user(false), global},
			Admitted:  true,
		},
		outcome: OutcomeAdmitted, forward: true, headers: true,
		verdicts: []Verdict{
			{LimitID: "user", Key: []string{"u1"}, Policy: perUser, Result: ratelimit.Allowed, Decision: allowed(10, 9, 0)},
			{LimitID: "global", Key: []string{"all"}, Policy: hourly, Result: ratelimit.Allowed, Decision: allowed(100, 99, 0)},
		},
	}, {
		name: "limited by the longest RetryAfter, policies named once",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(perUser, 1, false), req(hourly, 1, false), req(perUser, 2, false)},
			Decisions: []ratelimit.Decision{denied(10, 1500*time.Millisecond), denied(100, 3*time.Second+time.Millisecond), denied(10, time.Second)},
			Verdicts:  []Verdict{user(false), global, {LimitID: "again"}},
		},
		outcome: OutcomeLimited, status: http.StatusTooManyRequests, retry: 4, headers: true,
		violated: []string{"per-user", "hourly"},
		verdicts: []Verdict{
			{LimitID: "user", Key: []string{"u1"}, Policy: perUser, Result: ratelimit.Denied, Decision: denied(10, 1500*time.Millisecond)},
			{LimitID: "global", Key: []string{"all"}, Policy: hourly, Result: ratelimit.Denied, Decision: denied(100, 3*time.Second+time.Millisecond)},
			{LimitID: "again", Policy: perUser, Result: ratelimit.Denied, Decision: denied(10, time.Second)},
		},
	}, {
		name: "a shadow limit denies nothing and shows in no header",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(perUser, 1, true)},
			Decisions: []ratelimit.Decision{denied(10, time.Minute)},
			Verdicts:  []Verdict{user(false)},
			Admitted:  true,
		},
		outcome: OutcomeAdmitted, forward: true,
		verdicts: []Verdict{{LimitID: "user", Key: []string{"u1"}, Policy: perUser, Shadow: true, Result: ratelimit.ShadowDenied, Decision: denied(10, time.Minute)}},
	}, {
		name: "held for the longest delay of an allowed non-shadow limit",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(shaped, 1, false), req(perUser, 1, false), req(hourly, 1, true)},
			Decisions: []ratelimit.Decision{allowed(10, 8, 200*time.Millisecond), allowed(10, 9, 50*time.Millisecond), allowed(100, 99, time.Hour)},
			Verdicts:  []Verdict{{LimitID: "q"}, user(false), global},
			Admitted:  true,
		},
		outcome: OutcomeAdmitted, forward: true, headers: true, delay: 200 * time.Millisecond, held: 200 * time.Millisecond,
		verdicts: []Verdict{
			{LimitID: "q", Policy: shaped, Result: ratelimit.Allowed, Decision: allowed(10, 8, 200*time.Millisecond)},
			{LimitID: "user", Key: []string{"u1"}, Policy: perUser, Result: ratelimit.Allowed, Decision: allowed(10, 9, 50*time.Millisecond)},
			{LimitID: "global", Key: []string{"all"}, Policy: hourly, Shadow: true, Result: ratelimit.Allowed, Decision: allowed(100, 99, time.Hour)},
		},
	}, {
		name: "abandoned when the context ends during the hold",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(shaped, 1, false)},
			Decisions: []ratelimit.Decision{allowed(10, 8, time.Second)},
			Verdicts:  []Verdict{{LimitID: "q"}},
			Admitted:  true,
		},
		cancel:  true,
		outcome: OutcomeAbandoned, headers: true, delay: time.Second,
		verdicts: []Verdict{{LimitID: "q", Policy: shaped, Result: ratelimit.Allowed, Decision: allowed(10, 8, time.Second)}},
	}, {
		name: "abandoned when the watcher sees the client leave",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(shaped, 1, false)},
			Decisions: []ratelimit.Decision{allowed(10, 8, time.Second)},
			Verdicts:  []Verdict{{LimitID: "q"}},
			Admitted:  true,
		},
		watch:   true,
		outcome: OutcomeAbandoned, headers: true, delay: time.Second,
		verdicts: []Verdict{{LimitID: "q", Policy: shaped, Result: ratelimit.Allowed, Decision: allowed(10, 8, time.Second)}},
	}, {
		name: "an anonymous key is not reported",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(perUser, 1, false)},
			Decisions: []ratelimit.Decision{allowed(10, 9, 0)},
			Verdicts:  []Verdict{user(true)},
			Admitted:  true,
		},
		outcome: OutcomeAdmitted, forward: true, headers: true,
		verdicts: []Verdict{{LimitID: "user", Anonymous: true, Policy: perUser, Result: ratelimit.Allowed, Decision: allowed(10, 9, 0)}},
	}, {
		name: "a store error leaves the answer to the caller",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(perUser, 1, false)},
			Decisions: []ratelimit.Decision{{}},
			Verdicts:  []Verdict{user(false)},
			Err:       storeDown,
		},
		outcome: OutcomeStoreError,
	}, {
		name: "admitted concurrency requests leave their leases for Hold",
		e: Evaluated{
			Requests:  []ratelimit.Request{req(slots, 1, false), req(perUser, 1, false)},
			Decisions: []ratelimit.Decision{allowed(2, 1, 0), allowed(10, 9, 0)},
			Verdicts:  []Verdict{{LimitID: "slots"}, user(false)},
			Admitted:  true,
		},
		outcome: OutcomeAdmitted, forward: true, headers: true, leases: 1,
		verdicts: []Verdict{
			{LimitID: "slots", Policy: slots, Result: ratelimit.Allowed, Decision: allowed(2, 1, 0)},
			{LimitID: "user", Key: []string{"u1"}, Policy: perUser, Result: ratelimit.Allowed, Decision: allowed(10, 9, 0)},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if tt.cancel {
					cancel()
				}
				var watch ClientWatcher
				w := &goneWatcher{}
				if tt.watch {
					watch = w
				}
				e := tt.e
				e.At = t0
				res := Result{Status: 599, Forward: true} // Settle resets it
				ev := Event{Route: "api", Outcome: "stale", Delay: time.Hour}
				var seen []Outcome
				start := time.Now()
				e.Settle(ctx, watch, &res, &ev, func(ev *Event) { seen = append(seen, ev.Outcome) })
				if got := time.Since(start); got != tt.held {
					t.Errorf("Settle took %v, want %v", got, tt.held)
				}
				if diff := testdiff.Diff([]Outcome{tt.outcome}, seen); diff != "" {
					t.Errorf("observed outcomes (-want +got):\n%s", diff)
				}
				if ev.Route != "api" || ev.Outcome != tt.outcome || ev.Delay != tt.delay {
					t.Errorf("event route %q, outcome %s, delay %v; want api, %s, %v", ev.Route, ev.Outcome, ev.Delay, tt.outcome, tt.delay)
				}
				if !errors.Is(ev.Err, tt.e.Err) || (ev.Err == nil) != (tt.e.Err == nil) {
					t.Errorf("event error %v, want %v", ev.Err, tt.e.Err)
				}
				if !sameVerdicts(tt.verdicts, ev.Verdicts) {
					t.Errorf("verdicts:\n-%+v\n+%+v", tt.verdicts, ev.Verdicts)
				}
				if res.Forward != tt.forward || res.Status != tt.status || res.RetryAfter != tt.retry {
					t.Errorf("forward %v, status %d, retry after %d; want %v, %d, %d", res.Forward, res.Status, res.RetryAfter, tt.forward, tt.status, tt.retry)
				}
				if res.HasRateLimitHeaders() != tt.headers {
					t.Errorf("rate-limit headers %v, want %v", res.HasRateLimitHeaders(), tt.headers)
				}
				if tt.violated == nil {
					if res.Body != nil {
						t.Errorf("body %s, want none", res.Body)
					}
				} else {
					var body struct {
						Violated []string `json:"violated-policies"`
					}
					if err := json.Unmarshal(res.Body, &body); err != nil {
						t.Fatalf("body %q: %v", res.Body, err)
					}
					if diff := testdiff.Diff(tt.violated, body.Violated); diff != "" {
						t.Errorf("violated policies (-want +got):\n%s", diff)
					}
				}
				if len(res.leases) != tt.leases || res.held != nil {
					t.Errorf("%d leases and held %v, want %d and none", len(res.leases), res.held, tt.leases)
				}
				if tt.watch && w.stopped != 1 {
					t.Errorf("watch stopped %d times, want 1", w.stopped)
				}
			})
		})
	}
}

// TestEvaluatedHeaders: the headers Settle writes are the middleware's:
// the trio of the most constrained limit, and the IETF fields of every
// counted limit.
func TestEvaluatedHeaders(t *testing.T) {
	e := Evaluated{
		Requests: []ratelimit.Request{{Key: "a", Policy: perUser, Cost: 1}, {Key: "b", Policy: hourly, Cost: 1}},
		Decisions: []ratelimit.Decision{
			{Allowed: true, Limit: 10, Remaining: 9, Reset: 1500 * time.Millisecond},
			{Allowed: true, Limit: 100, Remaining: 5, Reset: 30 * time.Minute},
		},
		Verdicts: make([]Verdict, 2),
		Admitted: true,
		At:       t0,
	}
	var res Result
	var ev Event
	e.Settle(context.Background(), nil, &res, &ev, nil)
	got := map[string]string{}
	for i, name := range RateLimitHeaderNames {
		got[name] = string(res.RateLimitHeader(i))
	}
	want := map[string]string{
		HeaderLimit:           "100",
		HeaderRemaining:       "5",
		HeaderReset:           unix(30 * time.Minute),
		HeaderRateLimitPolicy: `"per-user";q=10;w=10, "hourly";q=100;w=3600`,
		HeaderRateLimit:       `"per-user";r=9;t=0, "hourly";r=5;t=0`,
	}
	if diff := testdiff.Diff(want, got); diff != "" {
		t.Errorf("headers (-want +got):\n%s", diff)
	}
}

// TestEvaluatedAbandonReleasesLeases: a request abandoned during its hold
// gives its leases back on Leases, and leaves none for Hold.
func TestEvaluatedAbandonReleasesLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slots := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "slots", Algorithm: ratelimit.Concurrency, Limit: 2, LeaseTTL: time.Minute})
		store := &countingStore{}
		e := Evaluated{
			Requests:  []ratelimit.Request{{Key: "s", Policy: slots, Cost: 1, Lease: "l1"}, {Key: "q", Policy: shaped, Cost: 1}},
			Decisions: []ratelimit.Decision{{Allowed: true, Limit: 2, Remaining: 1}, {Allowed: true, Limit: 10, Remaining: 8, Delay: time.Second}},
			Verdicts:  make([]Verdict, 2),
			Admitted:  true,
			Leases:    store,
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		var res Result
		var ev Event
		e.Settle(ctx, nil, &res, &ev, nil)
		if ev.Outcome != OutcomeAbandoned {
			t.Fatalf("outcome %s, want abandoned", ev.Outcome)
		}
		if _, released := store.counts(); released != 1 {
			t.Errorf("%d releases, want 1", released)
		}
		if l := (&Middleware{leases: store}).Hold(&res); l != nil {
			t.Errorf("Hold after an abandoned request returned %v, want nil", l)
		}
		time.Sleep(time.Minute) // the renewer finds nothing left to renew and stops
	})
}
