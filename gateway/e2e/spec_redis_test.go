package e2e

import (
	"testing"
)

// TestSpecRedisShadowOverridesPlans runs TestShadowOverridesPlans' cases,
// plus one more, on every Redis store variant: shadow limits, overrides and
// plans are decided by the Lua scripts too.
func TestSpecRedisShadowOverridesPlans(t *testing.T) {
	t.Parallel()
	for _, rs := range redisStores {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			p := start(t, shadowOverridesPlansConfig(rs.store(t, prefix(t)), up.URL))
			checkShadowOverridesPlans(t, p,
				tierCase{"plain", "pro", "pro-tier", 4}, // a new policy: a fresh budget
			)
		})
	}
}
