package config

import (
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"
)

// TestSCGValidation: compat scg and headers scg are accepted where they
// work and refused with a position elsewhere.
func TestSCGValidation(t *testing.T) {
	const redis = "store: {type: redis, redis: {addrs: [\"127.0.0.1:6379\"]}}\n"
	const cluster = "store: {type: redis, redis: {mode: cluster, addrs: [\"127.0.0.1:7000\"]}}\n"
	policies := `policies:
  scg: {algorithm: token_bucket, capacity: 10, rate: 2, compat: scg}
  own: {algorithm: token_bucket, capacity: 10, rate: 2}
  old: {algorithm: token_bucket, capacity: 10, rate: 2, compat: scg-4.1}
`
	route := func(limits string) string {
		return "routes:\n  - id: a\n    match: {path: /a}\n    upstream: http://127.0.0.1:1\n    limits:\n" + limits
	}
	c := mustParse(t, redis+policies+route("      - {policy: scg, key: header:X-User-Id, headers: scg, scg_route_id: orders}\n      - {policy: own, key: ip}\n      - {policy: old, key: ip}\n"), nil)
	if p := c.Policy("scg"); p == nil || p.Compat() != ratelimit.CompatSCG {
		t.Fatalf("Policy(scg) = %v", p)
	}
	if p := c.Policy("old"); p == nil || p.Compat() != ratelimit.CompatSCG41 {
		t.Fatalf("Policy(old) = %v", p)
	}
	if !strings.Contains(c.Effective(), "compat: \"scg\"") || !strings.Contains(c.Effective(), "headers: \"scg\"") || !strings.Contains(c.Effective(), "scg_route_id: \"orders\"") {
		t.Errorf("Effective() lacks compat or headers:\n%s", c.Effective())
	}
	for _, tc := range []struct{ name, src, want string }{
		{"memory store", policies + route("      - {policy: scg, key: ip}\n"), "test.yaml:2:65: policies.scg.compat: compat scg keeps the budget in Spring Cloud Gateway's Redis keys; it needs store.type redis"},
		{"list key", redis + policies + route("      - {policy: scg, key: [ip, path], scg_route_id: a}\n"), "routes[0].limits[0].key: policy \"scg\" has compat scg"},
		{"no route id", redis + policies + route("      - {policy: scg, key: ip}\n"), "routes[0].limits[0]: policy \"scg\" has compat scg (Spring Cloud Gateway 4.2.0 and later, whose keys name the route): set scg_route_id"},
		{"override without route id", redis + policies + route("      - {policy: own, key: ip, overrides: {x: scg}}\n"), "routes[0].limits[0]: policy \"scg\" has compat scg (Spring Cloud Gateway 4.2.0 and later"},
		{"route id with scg-4.1", redis + policies + route("      - {policy: old, key: ip, scg_route_id: a}\n"), "routes[0].limits[0].scg_route_id: policy \"old\" has compat scg-4.1 (Spring Cloud Gateway up to 4.1.x"},
		{"route id without compat", redis + policies + route("      - {policy: own, key: ip, scg_route_id: a}\n"), "routes[0].limits[0].scg_route_id: scg_route_id applies to policies with compat scg"},
		{"scg-4.1 memory store", "policies:\n  old: {algorithm: token_bucket, capacity: 10, rate: 2, compat: scg-4.1}\n" + route("      - {policy: old, key: ip}\n"), "policies.old.compat: compat scg-4.1 keeps the budget in Spring Cloud Gateway's Redis keys; it needs store.type redis"},
		{"anonymous", redis + policies + route("      - {policy: scg, key: ip, on_empty_key: anonymous}\n"), "routes[0].limits[0].on_empty_key: policy \"scg\" has compat scg"},
		{"override", redis + policies + route("      - {policy: own, key: ip, on_empty_key: anonymous, overrides: {x: scg}}\n"), "routes[0].limits[0].on_empty_key: policy \"scg\" has compat scg"},
		{"cluster", cluster + policies + route("      - {policy: scg, key: ip}\n      - {policy: own, key: ip}\n"), "routes[0].limits[0]: policy \"scg\" has compat scg, whose keys"},
		{"headers", redis + policies + route("      - {policy: own, key: ip, headers: envoy}\n"), "routes[0].limits[0].headers: unknown headers \"envoy\" (allowed: scg)"},
		{"algorithm", redis + "policies:\n  scg: {algorithm: gcra, burst: 10, rate: 2, compat: scg}\n" + route("      - {policy: scg, key: ip}\n"), "policies.scg.compat: compat does not apply to gcra (it takes token_bucket)"},
		{"rate", redis + "policies:\n  scg: {algorithm: token_bucket, capacity: 10, rate: 0.5, compat: scg}\n" + route("      - {policy: scg, key: ip}\n"), "policies.scg.rate: compat scg needs a whole number of tokens per second"},
		{"unknown", redis + "policies:\n  scg: {algorithm: token_bucket, capacity: 10, rate: 1, compat: kong}\n" + route("      - {policy: scg, key: ip}\n"), "unknown compat \"kong\" (scg for Spring Cloud Gateway 4.2.0 and later, scg-4.1 up to 4.1.x)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := parseErrors(t, tc.src, nil)
			if !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors:\n%v\nwant one containing %q", errs, tc.want)
			}
		})
	}
}
