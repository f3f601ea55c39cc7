package rls_test

import (
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/gateway"
)

// TestAdminAndMetrics: decisions of the rate limit service are counted
// under rls:DOMAIN, and the admin API inspects, resets and overrides
// their keys as a route's.
func TestAdminAndMetrics(t *testing.T) {
	in := start(t, ownConfig, nil, gateway.Deps{})
	for range 5 {
		in.call(t, "api", desc("user", "ann"))
	}
	in.call(t, "api", desc("user", "ann"))

	_, m := in.adminDo(t, "GET", "/metrics", "")
	for _, want := range []string{
		`sluice_decisions_total{policy="per-user",result="allowed",route="rls:api"} 5`,
		`sluice_decisions_total{policy="per-user",result="denied",route="rls:api"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if code, body := in.adminDo(t, "GET", "/admin/v1/stats", ""); code != 200 || !strings.Contains(body, `"rls:api"`) {
		t.Errorf("stats = %d %s, want the rls:api domain", code, body)
	}
	code, body := in.adminDo(t, "GET", "/admin/v1/limits/rls:api/ann", "")
	if code != 200 || !strings.Contains(body, `"policy":"per-user"`) || !strings.Contains(body, `"remaining":0`) {
		t.Fatalf("inspect ann = %d %s, want per-user with 0 remaining", code, body)
	}
	if code, _ := in.adminDo(t, "DELETE", "/admin/v1/limits/rls:api/ann", ""); code != 204 {
		t.Fatalf("reset ann = %d, want 204", code)
	}
	if r := in.call(t, "api", desc("user", "ann")); r.OverallCode != ok || r.Statuses[0].LimitRemaining != 4 {
		t.Errorf("after reset = %v remaining %d, want OK 4", r.OverallCode, r.Statuses[0].LimitRemaining)
	}
	if code, body := in.adminDo(t, "PUT", "/admin/v1/overrides/rls:api/ann", `{"policy":"per-tenant"}`); code != 200 {
		t.Fatalf("override = %d %s", code, body)
	}
	r := in.call(t, "api", desc("user", "ann"))
	if cl := r.Statuses[0].CurrentLimit; cl.GetName() != "per-tenant" || cl.GetRequestsPerUnit() != 100 {
		t.Errorf("with the override, current_limit = %v, want per-tenant's 100", cl)
	}
}
