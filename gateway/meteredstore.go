package gateway

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-gw/sluice/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
)

// meteredStore times every Evaluate (sluice_store_duration_seconds) and
// counts its failures by kind (sluice_store_errors_total). A call the client
// abandoned (context.Canceled) is not a store failure.
type meteredStore struct {
	ratelimit.Store
	metrics *metrics.Metrics
	// countErrors is false when the store counts its own failures (the
	// fallback store reports each Redis failure through a hook).
	countErrors bool
}

func (s meteredStore) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	start := time.Now()
	ok, err := s.Store.Evaluate(ctx, reqs, out)
	s.metrics.StoreDuration(time.Since(start))
	if err != nil && s.countErrors && !errors.Is(err, context.Canceled) && !errors.Is(err, ratelimit.ErrInvalidCost) {
		s.metrics.StoreError(errorKind(err))
	}
	return ok, err
}
