package httplimit

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

var scgBucket = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "scg", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 2, Compat: ratelimit.CompatSCG})

func scgHeaderValues(w *httptest.ResponseRecorder) map[string]string {
	out := map[string]string{}
	for _, name := range SCGHeaderNames {
		if v := w.Header().Values(name); len(v) > 0 {
			out[name] = v[len(v)-1]
			if len(v) > 1 {
				out[name+" (count)"] = "many"
			}
		}
	}
	return out
}

// TestSCGHeaders: a limit with SCGHeaders sends SCG's four headers: the
// tokens left (admitted or denied), rate, capacity and cost; -1 remaining
// when the store failed and the request went through, or no store counted.
func TestSCGHeaders(t *testing.T) {
	key := mustKey(t, "header:X-User-Id")
	run := func(store ratelimit.Store, onErr func(Request, error) *Problem, n int) *httptest.ResponseRecorder {
		t.Helper()
		m, err := New(Options{Route: "api", Store: store, OnStoreError: onErr,
			Limits: []Limit{{Policy: scgBucket, Key: key, Cost: 2, SCGHeaders: true, SCGRouteID: "api-scg"}}})
		if err != nil {
			t.Fatal(err)
		}
		var w *httptest.ResponseRecorder
		for range n {
			w = httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/api", nil)
			r.Header.Set("X-User-Id", "u1")
			m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
		}
		return w
	}
	want := func(rem string) map[string]string {
		return map[string]string{headerSCGRemaining: rem, headerSCGReplenishRate: "2", headerSCGBurstCapacity: "5", headerSCGRequestedTokens: "2"}
	}
	clock := kit.NewManualClock(t0)
	st := newTestStore(t, clock)
	w := run(st, nil, 1)
	if d := testdiff.Diff(want("3"), scgHeaderValues(w)); d != "" || w.Code != 200 {
		t.Errorf("admitted: %d (-want +got):\n%s", w.Code, d)
	}
	if !slices.Contains(st.keys(), ratelimit.SCGRouteKey("api-scg", "u1")) {
		t.Errorf("state keys %q, want SCG's %q", st.keys(), ratelimit.SCGRouteKey("api-scg", "u1"))
	}
	w = run(newTestStore(t, clock), nil, 3)
	if d := testdiff.Diff(want("1"), scgHeaderValues(w)); d != "" || w.Code != http.StatusTooManyRequests {
		t.Errorf("denied: %d (-want +got):\n%s", w.Code, d)
	}
	failing := newTestStore(t, clock)
	failing.err = errors.New("down")
	w = run(failing, func(Request, error) *Problem { return nil }, 1)
	if d := testdiff.Diff(want("-1"), scgHeaderValues(w)); d != "" || w.Code != 200 {
		t.Errorf("store failed, let through: %d (-want +got):\n%s", w.Code, d)
	}
	w = run(failing, nil, 1)
	if d := testdiff.Diff(map[string]string{}, scgHeaderValues(w)); d != "" || w.Code != http.StatusServiceUnavailable {
		t.Errorf("store failed, 503: %d (-want +got):\n%s", w.Code, d)
	}
	w = run(uncountedStore{newTestStore(t, clock), map[string]bool{"scg": true}}, nil, 1)
	if d := testdiff.Diff(want("-1"), scgHeaderValues(w)); d != "" || w.Code != 200 {
		t.Errorf("uncounted: %d (-want +got):\n%s", w.Code, d)
	}
}

// TestBudgetKey: SCG's keys name the route since SCG 4.2.0 (compat scg,
// with the limit's SCGRouteID), and not before (compat scg-4.1).
func TestBudgetKey(t *testing.T) {
	scg41 := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "scg41", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 2, Compat: ratelimit.CompatSCG41})
	routed := &Limit{ID: "0", SCGRouteID: "orders"}
	for _, tc := range []struct {
		l     *Limit
		p     *ratelimit.Policy
		parts []string
		want  string
	}{
		{routed, scgBucket, []string{"u1"}, "request_rate_limiter.{orders.u1}"},
		{&Limit{ID: "0"}, scg41, []string{"u1"}, "request_rate_limiter.{u1}"},
		{routed, perUser, []string{"u1"}, StateKey("api", "0", "per-user", []string{"u1"})},
		{&Limit{ID: "0"}, scgBucket, []string{"u1"}, StateKey("api", "0", "scg", []string{"u1"})},
		{routed, scgBucket, []string{"u1", "u2"}, StateKey("api", "0", "scg", []string{"u1", "u2"})},
	} {
		if got := BudgetKey("api", tc.l, tc.p, tc.parts); got != tc.want {
			t.Errorf("BudgetKey(api, route id %q, %s, %q) = %q, want %q", tc.l.SCGRouteID, tc.p.Name(), tc.parts, got, tc.want)
		}
	}
}

// TestSCGRouteIDChecked: New refuses a compat scg limit without the SCG
// route id, and one with a route id under compat scg-4.1.
func TestSCGRouteIDChecked(t *testing.T) {
	scg41 := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "scg41", Algorithm: ratelimit.TokenBucket, Capacity: 5, Rate: 2, Compat: ratelimit.CompatSCG41})
	key := mustKey(t, "header:X-User-Id")
	st := newTestStore(t, kit.NewManualClock(t0))
	for _, tc := range []struct {
		l    Limit
		want string
	}{
		{Limit{Policy: scgBucket, Key: key}, "scg_route_id is required"},
		{Limit{Policy: perUser, Key: key, Overrides: map[string]*ratelimit.Policy{"vip": scgBucket}}, "scg_route_id is required"},
		{Limit{Policy: scg41, Key: key, SCGRouteID: "api"}, "scg_route_id must be empty"},
	} {
		_, err := New(Options{Route: "api", Store: st, Limits: []Limit{tc.l}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error with %q", tc.l, err, tc.want)
		}
	}
	if _, err := New(Options{Route: "api", Store: st, Limits: []Limit{{Policy: scg41, Key: key}, {Policy: scgBucket, Key: key, SCGRouteID: "api"}}}); err != nil {
		t.Errorf("valid limits: %v", err)
	}
}

// TestOverrideToSCGIgnored: a live override naming a compat scg policy is
// ignored on a limit that cannot form SCG's key (no SCGRouteID, CanUse
// false), so no key outside the store's prefix is written; on a limit with
// SCGRouteID it applies to SCG's key.
func TestOverrideToSCGIgnored(t *testing.T) {
	key := mustKey(t, "header:X-User-Id")
	override := func(context.Context, string, []string) *ratelimit.Policy { return scgBucket }
	for _, tc := range []struct {
		routeID, want string
	}{
		{"", StateKey("api", "0", "per-user", []string{"u1"})},
		{"orders", ratelimit.SCGRouteKey("orders", "u1")},
	} {
		st := newTestStore(t, kit.NewManualClock(t0))
		m, err := New(Options{Route: "api", Store: st, Override: override,
			Limits: []Limit{{Policy: perUser, Key: key, SCGRouteID: tc.routeID}}})
		if err != nil {
			t.Fatal(err)
		}
		r := httptest.NewRequest(http.MethodGet, "/api", nil)
		r.Header.Set("X-User-Id", "u1")
		m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(httptest.NewRecorder(), r)
		if got := st.keys(); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("route id %q: state keys %q, want %q", tc.routeID, got, tc.want)
		}
		if got := CanUse(&Limit{SCGRouteID: tc.routeID}, scgBucket, []string{"u1"}); got != (tc.routeID != "") {
			t.Errorf("CanUse(route id %q) = %v", tc.routeID, got)
		}
	}
}
