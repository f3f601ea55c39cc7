package e2e

import (
	"strings"
	"testing"
)

// TestSpecKeyNeverAMetricsLabel: rate-limit key values (the
// rate-limit key is never a metrics label; docs/operations.md, "Metrics") do not show in /metrics, whether
// the request was admitted, denied, shadow-denied or had its policy picked
// by an override or a plan.
func TestSpecKeyNeverAMetricsLabel(t *testing.T) {
	t.Parallel()
	up := newUpstream(t)
	p := start(t, `store: {type: memory}`+header+`
policies:
  one: {algorithm: fixed_window, limit: 1, window: 24h}
  two: {algorithm: fixed_window, limit: 2, window: 24h}
routes:
  - id: keyed
    match: {path: /keyed/**}
    upstream: `+up.URL+`
    limits:
      - {policy: two, key: header:X-User-Id, overrides: {zq7-override-user: one}}
      - {policy: two, key: "query:zq7param"}
      - {policy: two, key: path}
      - {policy: two, key: [header:X-Tenant, ip]}
      - {policy: one, key: header:X-User-Id, shadow: true}
      - policy: two
        key: header:X-Other
        on_empty_key: anonymous
        plans: {from: header:X-Plan, policies: {zq7-plan-value: one}}
`)
	values := []string{
		"zq7-user-alpha", "zq7-override-user", "zq7-query-value", "zq7-path-segment", "zq7-tenant", "zq7-plan-value", "zq7-other",
	}
	codes := map[int]int{}
	for range 3 {
		for _, u := range []string{"zq7-user-alpha", "zq7-override-user"} {
			r := get(t, p.base+"/keyed/zq7-path-segment/"+u+"?zq7param=zq7-query-value",
				"X-User-Id", u, "X-Tenant", "zq7-tenant", "X-Plan", "zq7-plan-value", "X-Other", "zq7-other")
			codes[r.code]++
		}
		codes[get(t, p.base+"/keyed/x?zq7param=zq7-query-value", "X-User-Id", "zq7-user-alpha", "X-Tenant", "zq7-tenant").code]++
	}
	if codes[200] == 0 || codes[429] == 0 {
		t.Fatalf("status counts %v: want both admitted and denied requests", codes)
	}
	m := get(t, p.admin+"/metrics").body
	if !strings.Contains(m, `sluice_decisions_total{policy="two",result="denied",route="keyed"}`) ||
		!strings.Contains(m, `sluice_decisions_total{policy="one",result="shadow_denied",route="keyed"}`) {
		t.Fatalf("the requests were not counted:\n%s", grepLines(m, "sluice_decisions_total"))
	}
	for _, v := range append(values, "zq7") {
		if strings.Contains(m, v) {
			t.Errorf("/metrics contains the key value %q:\n%s", v, grepLines(m, v))
		}
	}
}
