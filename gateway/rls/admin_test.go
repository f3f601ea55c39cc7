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

// TestUnknownDomainMetric: each call for a domain the configuration does
// not define is answered OK and counted in sluice_rls_unknown_domain_total,
// which has no domain label; calls for a defined domain and refused calls
// are not counted.
func TestUnknownDomainMetric(t *testing.T) {
	in := start(t, ownConfig, nil, gateway.Deps{})
	_, m := in.adminDo(t, "GET", "/metrics", "")
	if !strings.Contains(m, "\nsluice_rls_unknown_domain_total 0\n") {
		t.Errorf("before any call, metrics lack sluice_rls_unknown_domain_total 0")
	}
	for _, d := range []string{"nope", "other", "nope"} {
		if r := in.call(t, d, desc("user", "ann")); r.OverallCode != ok || r.Statuses[0].CurrentLimit != nil {
			t.Errorf("domain %q: %v with limit %v, want OK without a limit", d, r.OverallCode, r.Statuses[0].CurrentLimit)
		}
	}
	in.call(t, "api", desc("user", "ann"))
	if _, err := in.ask("", 0, desc("user", "ann")); err == nil {
		t.Error("empty domain: no error")
	}
	_, m = in.adminDo(t, "GET", "/metrics", "")
	if !strings.Contains(m, "\nsluice_rls_unknown_domain_total 3\n") {
		t.Errorf("after 3 calls for unknown domains, metrics lack sluice_rls_unknown_domain_total 3:\n%s", grepLines(m, "sluice_rls"))
	}
	if strings.Contains(m, `"nope"`) {
		t.Error("metrics carry the unknown domain's name")
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
