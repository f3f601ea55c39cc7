package e2e

import (
	"testing"
)

// shadowOverridesPlansConfig has a shadow-only route and a route whose
// policy comes from an override, a plan or the default (SPEC §2).
func shadowOverridesPlansConfig(store, up string) string {
	return store + header + `
policies:
  tiny:      {algorithm: fixed_window, limit: 2, window: 24h}
  base:      {algorithm: fixed_window, limit: 3, window: 24h}
  vip:       {algorithm: fixed_window, limit: 6, window: 24h}
  pro-tier:  {algorithm: fixed_window, limit: 4, window: 24h}
routes:
  - id: shadowed
    match: {path: /shadow}
    respond: {body: "ok\n"}
    limits:
      - {policy: tiny, key: header:X-User-Id, shadow: true}
  - id: tiered
    match: {path: /tiered}
    upstream: ` + up + `
    limits:
      - policy: base
        key: header:X-User-Id
        overrides: {vip-user: vip}
        plans:
          from: header:X-Plan
          policies: {pro: pro-tier}
`
}

// checkShadowOverridesPlans: a shadow limit never denies and shows in no
// header but counts shadow_denied; overrides beat plans, which beat the
// default policy, each a budget of its own.
func checkShadowOverridesPlans(t *testing.T, p *proc) {
	t.Run("shadow", func(t *testing.T) {
		for i := range 4 {
			r := get(t, p.base+"/shadow", "X-User-Id", "s")
			if r.code != 200 || r.body != "ok\n" {
				t.Errorf("request %d through a shadow limit = %d, want 200", i+1, r.code)
			}
			for _, h := range []string{"X-RateLimit-Limit", "RateLimit-Policy", "RateLimit", "Retry-After"} {
				if r.header.Get(h) != "" {
					t.Errorf("shadow limit shows in %s: %q", h, r.header.Get(h))
				}
			}
		}
		if got := p.metric(`sluice_decisions_total{policy="tiny",result="shadow_denied",route="shadowed"}`); got != "2" {
			t.Errorf("shadow_denied = %q, want 2", got)
		}
		if got := p.metric(`sluice_decisions_total{policy="tiny",result="allowed",route="shadowed"}`); got != "2" {
			t.Errorf("shadow allowed = %q, want 2", got)
		}
	})
	t.Run("overrides and plans", func(t *testing.T) {
		for _, tt := range []struct {
			user, plan, policy string
			admitted           int
		}{
			{"plain", "", "base", 3},
			{"vip-user", "", "vip", 6},
			{"vip-user-2", "pro", "pro-tier", 4},
			{"free", "free", "base", 3},
			{"vip-user", "pro", "vip", 0},   // override beats plan; vip already spent
			{"plain", "pro", "pro-tier", 4}, // a new policy: a fresh budget
		} {
			got := 0
			for range 8 {
				r := get(t, p.base+"/tiered", "X-User-Id", tt.user, "X-Plan", tt.plan)
				if r.code == 200 {
					got++
				} else {
					check429(t, r, tt.policy)
				}
			}
			if got != tt.admitted {
				t.Errorf("user %q plan %q: %d admitted, want %d (%s)", tt.user, tt.plan, got, tt.admitted, tt.policy)
			}
		}
	})
}

// TestSpecRedisShadowOverridesPlans runs TestShadowOverridesPlans' cases on
// every Redis store variant: shadow limits, overrides and plans are decided
// by the Lua scripts too.
func TestSpecRedisShadowOverridesPlans(t *testing.T) {
	t.Parallel()
	for _, rs := range redisStores {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			p := start(t, shadowOverridesPlansConfig(rs.store(t, prefix(t)), up.URL))
			checkShadowOverridesPlans(t, p)
		})
	}
}
