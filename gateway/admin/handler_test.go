package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gw/sluice/ratelimit"
)

// fakeGateway answers the admin handler as a gateway would, with a fixed
// readiness and store status.
type fakeGateway struct {
	ready  error
	status StoreView
}

func (f *fakeGateway) Ready(context.Context) error           { return f.ready }
func (f *fakeGateway) Store() ratelimit.Store                { return nil }
func (f *fakeGateway) Overrides() Overrides                  { return noOverrides{} }
func (f *fakeGateway) StoreStatus(context.Context) StoreView { return f.status }

type noOverrides struct{}

func (noOverrides) List() []Override               { return nil }
func (noOverrides) Lookup(string, []string) string { return "" }
func (noOverrides) Set(context.Context, string, []string, string) error {
	return errors.New("read-only")
}
func (noOverrides) Remove(context.Context, string, []string) (bool, error) { return false, nil }

func serve(t *testing.T, h http.Handler, path, token string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("GET", path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// TestHandlerAsksTheGateway: /readyz follows Gateway.Ready, the stats'
// store is Gateway.StoreStatus, and without a token all of /admin/ is 404.
func TestHandlerAsksTheGateway(t *testing.T) {
	logins := NewLogins(nil)
	g := &fakeGateway{status: StoreView{Type: "memory", OnError: "local", Healthy: true, Breaker: "none"}}
	o := Options{Token: "tok", Logins: logins, Stats: NewStats([]string{"api"}), Routes: []Route{{ID: "api"}}}
	h := New(g, o)
	if code, _ := serve(t, h, "/readyz", ""); code != 200 {
		t.Errorf("/readyz with the gateway ready = %d, want 200", code)
	}
	g.ready = errors.New("store down")
	if code, _ := serve(t, h, "/readyz", ""); code != 503 {
		t.Errorf("/readyz with the gateway not ready = %d, want 503", code)
	}
	code, body := serve(t, h, "/admin/v1/stats", "tok")
	if code != 200 {
		t.Fatalf("/admin/v1/stats = %d %s", code, body)
	}
	var v StatsView
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(g.status, v.Store); diff != "" {
		t.Errorf("stats' store (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]RouteView{{Route: "api"}}, v.Routes); diff != "" {
		t.Errorf("stats' routes (-want +got):\n%s", diff)
	}
	o.Token = ""
	if code, _ := serve(t, New(g, o), "/admin/v1/stats", "tok"); code != 404 {
		t.Errorf("/admin/v1/stats without a configured token = %d, want 404", code)
	}
}

// TestStatsPools: the stats carry Options.Pools' answer, asked at each
// request.
func TestStatsPools(t *testing.T) {
	g := &fakeGateway{status: StoreView{Type: "memory"}}
	up := true
	o := Options{Token: "tok", Logins: NewLogins(nil), Stats: NewStats([]string{"fleet"}), Routes: []Route{{ID: "fleet"}},
		Pools: func() []PoolView {
			return []PoolView{{Route: "fleet", Targets: []TargetView{
				{Target: "http://10.0.0.1:8080", Up: up, InFlight: 2, Requests: 7},
				{Target: "http://10.0.0.2:8080", Up: false, Requests: 3},
			}}}
		}}
	h := New(g, o)
	for _, want := range []bool{true, false} {
		up = want
		code, body := serve(t, h, "/admin/v1/stats", "tok")
		if code != 200 {
			t.Fatalf("/admin/v1/stats = %d %s", code, body)
		}
		var v StatsView
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatal(err)
		}
		wantPools := []PoolView{{Route: "fleet", Targets: []TargetView{
			{Target: "http://10.0.0.1:8080", Up: want, InFlight: 2, Requests: 7},
			{Target: "http://10.0.0.2:8080", Up: false, Requests: 3},
		}}}
		if diff := cmp.Diff(wantPools, v.Pools); diff != "" {
			t.Errorf("stats' pools (-want +got):\n%s", diff)
		}
	}
}
