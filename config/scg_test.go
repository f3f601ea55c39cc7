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
`
	route := func(limits string) string {
		return "routes:\n  - id: a\n    match: {path: /a}\n    upstream: http://127.0.0.1:1\n    limits:\n" + limits
	}
	c := mustParse(t, redis+policies+route("      - {policy: scg, key: header:X-User-Id, headers: scg}\n      - {policy: own, key: ip}\n"), nil)
	if p := c.Policy("scg"); p == nil || p.Compat() != ratelimit.CompatSCG {
		t.Fatalf("Policy(scg) = %v", p)
	}
	if !strings.Contains(c.Effective(), "compat: \"scg\"") || !strings.Contains(c.Effective(), "headers: \"scg\"") {
		t.Errorf("Effective() lacks compat or headers:\n%s", c.Effective())
	}
	for _, tc := range []struct{ name, src, want string }{
		{"memory store", policies + route("      - {policy: scg, key: ip}\n"), "test.yaml:2:65: policies.scg.compat: compat scg keeps the budget in Spring Cloud Gateway's Redis keys; it needs store.type redis"},
		{"list key", redis + policies + route("      - {policy: scg, key: [ip, path]}\n"), "routes[0].limits[0].key: policy \"scg\" has compat scg"},
		{"anonymous", redis + policies + route("      - {policy: scg, key: ip, on_empty_key: anonymous}\n"), "routes[0].limits[0].on_empty_key: policy \"scg\" has compat scg"},
		{"override", redis + policies + route("      - {policy: own, key: ip, on_empty_key: anonymous, overrides: {x: scg}}\n"), "routes[0].limits[0].on_empty_key: policy \"scg\" has compat scg"},
		{"cluster", cluster + policies + route("      - {policy: scg, key: ip}\n      - {policy: own, key: ip}\n"), "routes[0].limits[0]: policy \"scg\" has compat scg, whose keys"},
		{"headers", redis + policies + route("      - {policy: own, key: ip, headers: envoy}\n"), "routes[0].limits[0].headers: unknown headers \"envoy\" (allowed: scg)"},
		{"algorithm", redis + "policies:\n  scg: {algorithm: gcra, burst: 10, rate: 2, compat: scg}\n" + route("      - {policy: scg, key: ip}\n"), "policies.scg.compat: compat does not apply to gcra (it takes token_bucket)"},
		{"rate", redis + "policies:\n  scg: {algorithm: token_bucket, capacity: 10, rate: 0.5, compat: scg}\n" + route("      - {policy: scg, key: ip}\n"), "policies.scg.rate: compat scg needs a whole number of tokens per second"},
		{"unknown", redis + "policies:\n  scg: {algorithm: token_bucket, capacity: 10, rate: 1, compat: kong}\n" + route("      - {policy: scg, key: ip}\n"), "unknown compat \"kong\" (only scg)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := parseErrors(t, tc.src, nil)
			if !strings.Contains(errs.Error(), tc.want) {
				t.Errorf("errors:\n%v\nwant one containing %q", errs, tc.want)
			}
		})
	}
}
