package ratelimit

import "context"

// Request is one limit to evaluate for one incoming request.
type Request struct {
	// Key names the state. Callers compose it so that two budgets never share a
	// Key (for the gateway: route, limit, policy and the key value's parts,
	// length-prefixed). Stores treat it as opaque bytes and never interpret it.
	Key string
	// Policy is the policy in force for this key. It must not be nil.
	Policy *Policy
	// Cost is the number of units the request takes: 1..Policy.Max(); zero means 1.
	Cost int64
	// Shadow marks a limit that is evaluated and reported but never denies. It
	// consumes when the request is admitted and it would admit too.
	Shadow bool
	// Lease identifies the request's lease on a concurrency policy (see
	// [LeaseStore]); other policies ignore it.
	Lease string
}

// Store evaluates rate limits against shared state. Implementations must be
// safe for concurrent use.
//
// The contract every Store follows (and ratelimittest checks):
//
//   - Evaluate decides all limits of one request as one atomic step. The
//     request is admitted when every non-shadow limit admits; then every
//     admitting limit (shadow ones included) consumes its cost. Otherwise no
//     limit's state changes at all. Each limit's own verdict is reported in
//     out: a limit that would admit on a request another limit denied reports
//     Allowed with its Remaining unchanged.
//   - Time is the store's own clock: the process clock (injectable) in memory,
//     Redis TIME in Redis. Callers never pass a time.
//   - An error means the store could not decide (timeout, connection, bad
//     input such as ErrInvalidCost); out is then undefined. Being limited is
//     never an error.
//
// Package [github.com/sluice-gw/sluice/ratelimit/kit] holds what a store
// author needs: the state, the step function and the request checks.
type Store interface {
	// Evaluate decides reqs all-or-nothing, writes one Decision per request
	// into out[:len(reqs)] and reports whether the request is admitted.
	// len(out) must be at least len(reqs).
	Evaluate(ctx context.Context, reqs []Request, out []Decision) (bool, error)
	// Peek writes each limit's current state into out without consuming
	// anything, as if evaluating a request of cost Cost that is then dropped.
	Peek(ctx context.Context, reqs []Request, out []Decision) error
	// Reset deletes the state of each limit, restoring its full budget.
	Reset(ctx context.Context, reqs []Request) error
}
