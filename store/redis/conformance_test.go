package redis

import (
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/ratelimittest"
)

// TestConformance runs the ratelimittest suite on standalone Redis and on a
// 3-master cluster, with the suite's manual clock passed to the scripts as
// an explicit time.
func TestConformance(t *testing.T) {
	for _, dep := range deployments {
		t.Run(dep.name, func(t *testing.T) {
			c := dep.client(t)
			ratelimittest.Run(t, func(t *testing.T, clock ratelimit.Clock) ratelimit.Store {
				return newTestStore(t, c, clock)
			})
		})
	}
}
