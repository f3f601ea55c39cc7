package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Concurrency is the in-flight limit: at most Limit requests of a key hold a
// lease at once, across every process sharing the store. A request takes a
// lease when it is admitted and gives it back when it ends (Release); a
// lease its holder never gives back (a process that died mid-request)
// expires LeaseTTL after it was taken or last renewed.
const Concurrency Algorithm = "concurrency"

// Bounds and default of a concurrency policy's lease TTL.
const (
	// DefaultLeaseTTL is the lease TTL when PolicyConfig.LeaseTTL is zero.
	DefaultLeaseTTL = 30 * time.Second
	// MinLeaseTTL is the shortest lease TTL.
	MinLeaseTTL = 100 * time.Millisecond
	// LeaseRetryCap bounds the RetryAfter of a concurrency denial: a slot is
	// usually freed by its request's end, which no store can foresee, so a
	// denial reports the earliest lease expiry only up to this bound.
	LeaseRetryCap = time.Second
)

// LeaseStore is a Store that also decides concurrency policies. Its
// Evaluate treats a request whose policy is a concurrency policy as a lease:
//
//   - The lease is identified by Request.Lease, which the caller makes
//     unique per request (across processes) and must not be empty.
//   - The limit admits when fewer than Limit unexpired leases are held on
//     the key, or when this lease is already held (taking it again renews
//     it). Admitting stores the lease with an expiry of LeaseTTL from the
//     store's clock.
//   - It composes with the rate limits of the same call all-or-nothing, as
//     Store describes: a request a rate limit denies takes no lease, and a
//     request denied for concurrency consumes no rate budget.
//   - The Decision: Limit is the policy's limit; Remaining the slots left
//     after this request (or, when nothing was taken, left now); Reset how
//     long until the last held lease expires; RetryAfter, for a denial, how
//     long until the earliest held lease expires, at most LeaseRetryCap;
//     Next, when Remaining is zero, what RetryAfter a new lease would get.
//
// Peek reports a concurrency limit as Evaluate would without taking the
// lease; Reset drops every lease of the key.
type LeaseStore interface {
	Store
	// Release gives back the leases named by reqs (Key, Policy and Lease of
	// the requests Evaluate admitted). Releasing a lease that is not held
	// (released before, or expired) does nothing, so a release may be
	// retried safely.
	Release(ctx context.Context, reqs []Request) error
	// Renew extends each lease named by reqs to LeaseTTL from now, in as
	// few store calls as it can (every lease a process holds goes in one
	// Renew). The caller still holds these leases: a lease the store no
	// longer has (it expired while renewals failed, or the store lost its
	// data) is added back, and counted in readded. So Renew must not be
	// called for a lease after, or concurrently with, its Release (a Lease
	// of package httplimit orders the two). Adding a lease back may leave a
	// key holding more than Limit leases, when others were admitted while
	// it was missing; new requests are then denied until enough end. On an
	// error, some of the leases may have been renewed.
	Renew(ctx context.Context, reqs []Request) (readded int, err error)
}

// HasLeases reports whether any of reqs is a concurrency limit.
func HasLeases(reqs []Request) bool {
	for i := range reqs {
		if p := reqs[i].Policy; p != nil && p.IsConcurrency() {
			return true
		}
	}
	return false
}

// LeasesOf returns the concurrency requests of reqs that name a lease, in a
// new slice (nil if there are none).
func LeasesOf(reqs []Request) []Request {
	var out []Request
	for _, r := range reqs {
		if r.Policy != nil && r.Policy.IsConcurrency() && r.Lease != "" {
			out = append(out, r)
		}
	}
	return out
}

// ErrNoLeases is returned (wrapped) for a concurrency request given to a
// store that is not a LeaseStore.
var ErrNoLeases = errors.New("store does not hold leases")

// ReleaseLeases calls s.Release if s is a LeaseStore; otherwise it fails
// with ErrNoLeases. Store wrappers use it to pass releases on.
func ReleaseLeases(ctx context.Context, s Store, reqs []Request) error {
	if ls, ok := s.(LeaseStore); ok {
		return ls.Release(ctx, reqs)
	}
	return fmt.Errorf("release: %T: %w", s, ErrNoLeases)
}

// RenewLeases calls s.Renew if s is a LeaseStore; otherwise it fails with
// ErrNoLeases.
func RenewLeases(ctx context.Context, s Store, reqs []Request) (int, error) {
	if ls, ok := s.(LeaseStore); ok {
		return ls.Renew(ctx, reqs)
	}
	return 0, fmt.Errorf("renew: %T: %w", s, ErrNoLeases)
}
