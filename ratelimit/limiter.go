package ratelimit

import (
	"context"
	"errors"
)

// Limiter applies one policy to many keys on a Store. It is the small facade
// for library users; the gateway calls the Store directly to evaluate several
// limits at once. A Limiter is safe for concurrent use.
type Limiter struct {
	policy *Policy
	store  Store
	prefix string
}

// NewLimiter returns a Limiter for policy on store. Keys are prefixed with the
// policy's name so that two Limiters with different policies on one store
// never share state.
func NewLimiter(policy *Policy, store Store) (*Limiter, error) {
	if policy == nil || store == nil {
		return nil, errors.New("ratelimit: NewLimiter needs a policy and a store")
	}
	return &Limiter{policy: policy, store: store, prefix: policy.Name() + "\x00"}, nil
}

// Policy returns the limiter's policy.
func (l *Limiter) Policy() *Policy { return l.policy }

// Allow reports whether one unit for key is admitted now, consuming it if so.
func (l *Limiter) Allow(ctx context.Context, key string) (Decision, error) {
	return l.AllowN(ctx, key, 1)
}

// AllowN reports whether n units for key are admitted now, consuming them if
// so. It returns ErrInvalidCost for n outside 1..Policy().Max(), and the
// store's error when the store could not decide.
func (l *Limiter) AllowN(ctx context.Context, key string, n int64) (Decision, error) {
	var out [1]Decision
	reqs := [1]Request{{Key: l.prefix + key, Policy: l.policy, Cost: n}}
	if n == 0 {
		return Decision{}, l.policy.CheckCost(n)
	}
	if _, err := l.store.Evaluate(ctx, reqs[:], out[:]); err != nil {
		return Decision{}, err
	}
	return out[0], nil
}

// Peek reports key's current state without consuming.
func (l *Limiter) Peek(ctx context.Context, key string) (Decision, error) {
	var out [1]Decision
	reqs := [1]Request{{Key: l.prefix + key, Policy: l.policy}}
	if err := l.store.Peek(ctx, reqs[:], out[:]); err != nil {
		return Decision{}, err
	}
	return out[0], nil
}

// Reset restores key's full budget.
func (l *Limiter) Reset(ctx context.Context, key string) error {
	return l.store.Reset(ctx, []Request{{Key: l.prefix + key, Policy: l.policy}})
}
