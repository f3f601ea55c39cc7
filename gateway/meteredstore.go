package gateway

import (
	"context"
	"time"

	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
)

// meteredStore times every Evaluate (sluice_store_duration_seconds) and
// counts the leases renewals add back. The
// store's failures are counted by kind where on_error handles them (the
// fallback store's OnStoreError hook, see openStore).
type meteredStore struct {
	ratelimit.Store
	metrics *metrics.Metrics
}

func (s meteredStore) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	start := time.Now()
	ok, err := s.Store.Evaluate(ctx, reqs, out)
	s.metrics.StoreDuration(time.Since(start))
	return ok, err
}

// Release passes the leases back to the store.
func (s meteredStore) Release(ctx context.Context, reqs []ratelimit.Request) error {
	return ratelimit.ReleaseLeases(ctx, s.Store, reqs)
}

// Renew passes the renewal to the store and counts the leases it added
// back (sluice_lease_readds_total). Failures are counted where they
// happen, by the fallback store's OnRenewFailure hook (see openStore).
func (s meteredStore) Renew(ctx context.Context, reqs []ratelimit.Request) (int, error) {
	n, err := ratelimit.RenewLeases(ctx, s.Store, reqs)
	s.metrics.LeaseReadds(n)
	return n, err
}
