package memory

import (
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/ratelimittest"
)

// TestConformance runs the Store conformance suite on fresh stores reading
// the suite's manual clock.
func TestConformance(t *testing.T) {
	ratelimittest.Run(t, func(t *testing.T, clock ratelimit.Clock) ratelimit.Store {
		return newTestStore(t, Options{Clock: clock})
	})
}
