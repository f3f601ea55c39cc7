package localdeny

import (
	"context"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Concurrency limits pass through: a slot is freed by any request's end, so
// a concurrency denial is never remembered (see remember), and releases and
// renewals go straight to the inner store.

// Release gives the leases back on the inner store.
func (s *Store) Release(ctx context.Context, reqs []ratelimit.Request) error {
	return ratelimit.ReleaseLeases(ctx, s.inner, reqs)
}

// Renew renews the leases on the inner store.
func (s *Store) Renew(ctx context.Context, reqs []ratelimit.Request) (int, error) {
	return ratelimit.RenewLeases(ctx, s.inner, reqs)
}

// Release gives the leases back on the view's inner store.
func (v view) Release(ctx context.Context, reqs []ratelimit.Request) error {
	return ratelimit.ReleaseLeases(ctx, v.inner, reqs)
}

// Renew renews the leases on the view's inner store.
func (v view) Renew(ctx context.Context, reqs []ratelimit.Request) (int, error) {
	return ratelimit.RenewLeases(ctx, v.inner, reqs)
}
