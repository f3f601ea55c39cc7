package ratelimit

import "github.com/sluice-gw/sluice/ratelimit/internal/params"

// The step functions live in package ratelimit/kit; they read a policy's
// integer parameters through this hook rather than through exported methods.
func init() {
	params.Of = func(policy any) (max, interval, window, maxDelay int64) {
		p := policy.(*Policy)
		return p.max, p.interval, p.window, p.maxDelay
	}
}
