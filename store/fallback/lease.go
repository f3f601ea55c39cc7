package fallback

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Leases (concurrency limits). A lease is taken on whichever store decided
// the request: the primary while it works (and then recorded on the Local
// store too, as every admission is, so the Local store's in-flight count
// follows this instance's requests), the Local store while the primary is
// unavailable. In Local mode a request with concurrency limits takes its
// leases on the Local store before the primary is asked
// (evaluateLeasesFirst), so that one instance never exceeds a limit even
// while the primary has lost leases its requests still hold. A lease is
// released or renewed on both stores; a renewal adds back what either
// store lost. Releasing an
// id is idempotent and ids are unique per request, so releasing on a store
// that never held the lease, or twice, frees nobody else's slot.
//
// A release the primary fails is retried in the background, a bounded
// number of times (releaseRetries, about releaseBackoff·2^releaseRetries in
// all) by a bounded number of goroutines (maxReleasers); past those bounds
// the lease is left to expire by its lease TTL.
const (
	releaseRetries = 5
	releaseBackoff = 100 * time.Millisecond
	maxReleasers   = 256
)

// releasers counts the background release retries running, over every Store.
var releasers atomic.Int64

// Release gives back the leases on the Local store and on the primary. A
// failure of the primary is retried in the background (see above) and not
// reported: the lease ends either way. It never fails.
func (s *Store) Release(ctx context.Context, reqs []ratelimit.Request) error {
	reqs = ratelimit.LeasesOf(reqs)
	if len(reqs) == 0 {
		return nil
	}
	if s.local != nil {
		_ = ratelimit.ReleaseLeases(ctx, s.local, reqs) // the memory store never fails
	}
	if s.Active() {
		// The breaker is open: asking now would only wait for the timeout.
		go s.releaseLater(reqs, releaseRetries)
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	err := ratelimit.ReleaseLeases(pctx, s.primary, reqs)
	cancel()
	if err != nil {
		go s.releaseLater(reqs, releaseRetries)
	}
	return nil
}

// releaseLater retries a release on the primary up to tries times with a
// doubling backoff, unless maxReleasers retries are running already.
func (s *Store) releaseLater(reqs []ratelimit.Request, tries int) {
	if releasers.Add(1) > maxReleasers {
		releasers.Add(-1)
		return // left to expire
	}
	defer releasers.Add(-1)
	reqs = append([]ratelimit.Request(nil), reqs...)
	wait := releaseBackoff
	for range tries {
		time.Sleep(wait)
		wait *= 2
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		err := ratelimit.ReleaseLeases(ctx, s.primary, reqs)
		cancel()
		if err == nil {
			return
		}
	}
}

// Renew renews the leases on both stores, in one call to each, adding back
// the ones a store lost (see [ratelimit.LeaseStore]), and returns how many
// the primary added back (the Local store, when the primary failed). The call to the primary is made whether or not
// the breaker is open, so that the leases are back as soon as it answers;
// its failure is reported to Options.OnRenewFailure, and returned only
// without a Local store (Allow and Deny modes): with one, the Local store
// holds the leases while the primary is away, and the first renewal that
// reaches the primary again adds back the ones it lost meanwhile.
func (s *Store) Renew(ctx context.Context, reqs []ratelimit.Request) (int, error) {
	reqs = ratelimit.LeasesOf(reqs)
	if len(reqs) == 0 {
		return 0, nil
	}
	localN := 0
	if s.local != nil {
		localN, _ = ratelimit.RenewLeases(ctx, s.local, reqs) // the memory store never fails
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := ratelimit.RenewLeases(pctx, s.primary, reqs)
	if err != nil {
		if s.onRenewFail != nil {
			s.onRenewFail(err)
		}
		if s.local != nil {
			return localN, nil
		}
	}
	return n, err
}

// Release passes to the Store.
func (o observed) Release(ctx context.Context, reqs []ratelimit.Request) error {
	return o.s.Release(ctx, reqs)
}

// Renew passes to the Store.
func (o observed) Renew(ctx context.Context, reqs []ratelimit.Request) (int, error) {
	return o.s.Renew(ctx, reqs)
}
