package fallback

import (
	"context"
	"fmt"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// Evaluate decides reqs all-or-nothing, as [ratelimit.Store] describes: on
// the primary while it works, otherwise by the Store's mode (see the package
// documentation). It returns the error of [kit.CheckRequests] for an
// invalid request (wrapping [ratelimit.ErrInvalidCost] for a bad cost) and
// ctx.Err() when the caller's context ends during the primary call; in Deny
// mode, while the primary is unavailable, an error wrapping
// [ErrUnavailable]; and an error Options.Classify does not count as a store
// failure, unchanged. A store failure is never returned in the other modes.
func (s *Store) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	return s.evaluate(ctx, reqs, out, nil)
}

// Observed returns a view of s whose Evaluate also reports each of its
// decisions made without the primary to onFallback, besides
// Options.OnFallback: the caller names, for example, the route it decides
// for, without putting it in the context. The view shares all of s's state.
func (s *Store) Observed(onFallback func(ctx context.Context, mode Mode)) ratelimit.Store {
	return observed{s: s, hook: onFallback}
}

// observed is the view Observed returns.
type observed struct {
	s    *Store
	hook func(context.Context, Mode)
}

func (o observed) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	return o.s.evaluate(ctx, reqs, out, o.hook)
}

func (o observed) Peek(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	return o.s.Peek(ctx, reqs, out)
}

func (o observed) Reset(ctx context.Context, reqs []ratelimit.Request) error {
	return o.s.Reset(ctx, reqs)
}

// evaluate is Evaluate, reporting fallback decisions to hook too.
func (s *Store) evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision, hook func(context.Context, Mode)) (bool, error) {
	if err := kit.CheckRequests(reqs, out); err != nil {
		return false, err
	}
	if len(reqs) == 0 {
		return true, nil
	}
	if s.inProcess {
		return s.evaluateInProcess(ctx, reqs, out, hook)
	}
	done, err := s.cb.Allow()
	s.notify()
	if err != nil { // open, or half-open with the probe in flight
		return s.fallback(ctx, reqs, out, nil, hook)
	}
	if s.debts != nil && s.debts.owes(reqs) {
		return s.evaluateOwing(ctx, done, reqs, out, hook)
	}
	if s.local != nil && ratelimit.HasLeases(reqs) {
		return s.evaluateLeasesFirst(ctx, done, reqs, out, hook)
	}
	pctx, cancel := s.evaluateCtx(ctx)
	start := monoNow()
	admitted, err := s.primary.Evaluate(pctx, reqs, out)
	cancel()
	fail, pass := s.outcome(ctx, done, err, start)
	switch {
	case pass != nil:
		return false, pass
	case fail:
		return s.fallback(ctx, reqs, out, err, hook)
	}
	if admitted && s.local != nil {
		s.record(ctx, reqs, out)
	}
	return admitted, nil
}

// evaluateInProcess decides reqs on an in-process primary, by the mode when
// it fails.
func (s *Store) evaluateInProcess(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision, hook func(context.Context, Mode)) (bool, error) {
	admitted, err := s.primary.Evaluate(ctx, reqs, out)
	if err == nil {
		return admitted, nil
	}
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	kind, failure := s.classify(err)
	if !failure {
		return false, err
	}
	if s.onError != nil {
		s.onError(ctx, kind)
	}
	return s.fallback(ctx, reqs, out, err, hook)
}

// evaluateOwing decides a request that touches a key the fallback admitted
// requests for: local first, then, if the Local store admits, the primary.
func (s *Store) evaluateOwing(ctx context.Context, done func(error), reqs []ratelimit.Request, out []ratelimit.Decision, hook func(context.Context, Mode)) (bool, error) {
	admitted, err := s.local.Evaluate(ctx, reqs, out)
	if err != nil || !admitted {
		done(errExcluded) // the primary was not asked
		s.notify()
		if err != nil {
			return false, fmt.Errorf("fallback store: local: %w", err)
		}
		// A denial by the Local store alone is a decision made without the
		// primary: it counts as a fallback decision (docs/semantics.md §6.5).
		s.fellBack(ctx, hook)
		return false, nil
	}
	s.debts.charge(reqs, out)
	sc := s.getScratch(len(reqs))
	defer s.putScratch(sc)
	copy(sc.out, out[:len(reqs)])
	pctx, cancel := s.evaluateCtx(ctx)
	start := monoNow()
	admitted, err = s.primary.Evaluate(pctx, reqs, out)
	cancel()
	fail, pass := s.outcome(ctx, done, err, start)
	switch {
	case pass != nil:
		return false, pass
	case fail:
		// The local decision, already made and charged, stands.
		s.fellBack(ctx, hook)
		copy(out, sc.out)
		return true, nil
	}
	if !admitted {
		// The primary denied: the leases the Local store took are not
		// held by anyone.
		if leases := ratelimit.LeasesOf(reqs); leases != nil {
			_ = ratelimit.ReleaseLeases(ctx, s.local, leases)
		}
	}
	return admitted, nil
}

// evaluateLeasesFirst decides a request with concurrency limits in Local
// mode: its leases are taken on the Local store first, which holds every
// lease this instance holds (see lease.go), and the primary is asked only
// if they all admit. So this instance never holds more leases of a key
// than its limit, even while the primary has lost some of them (they
// expired while it was away, or it restarted empty) and before a renewal
// adds them back. A request the Local store denies is answered without
// the primary, with the Local store's view of its rate limits; it is not a
// fallback decision: the primary, holding every lease, would deny it too.
func (s *Store) evaluateLeasesFirst(ctx context.Context, done func(error), reqs []ratelimit.Request, out []ratelimit.Decision, hook func(context.Context, Mode)) (bool, error) {
	leases := ratelimit.LeasesOf(reqs)
	lout := make([]ratelimit.Decision, len(leases))
	if ok, err := s.local.Evaluate(ctx, leases, lout); err != nil || !ok {
		done(errExcluded) // the primary was not asked
		s.notify()
		if err != nil {
			return false, fmt.Errorf("fallback store: local: %w", err)
		}
		if err := s.local.Peek(ctx, reqs, out); err != nil {
			return false, fmt.Errorf("fallback store: local: %w", err)
		}
		return false, nil
	}
	pctx, cancel := s.evaluateCtx(ctx)
	start := monoNow()
	admitted, err := s.primary.Evaluate(pctx, reqs, out)
	cancel()
	fail, pass := s.outcome(ctx, done, err, start)
	switch {
	case pass != nil:
		admitted, err = false, pass
	case fail:
		admitted, err = s.fallback(ctx, reqs, out, err, hook)
	case admitted:
		s.record(ctx, reqs, out)
	}
	if !admitted {
		// The leases taken on the Local store are held by nobody.
		_ = ratelimit.ReleaseLeases(ctx, s.local, leases)
	}
	return admitted, err
}

// fallback decides reqs without the primary, by the Store's mode. cause is
// the primary's error, nil when the breaker did not let the call through.
func (s *Store) fallback(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision, cause error, hook func(context.Context, Mode)) (bool, error) {
	if s.mode == Local && s.local == nil {
		// An in-process primary in Local mode: there is nothing more local.
		return false, fmt.Errorf("fallback store: %w: %s", ErrUnavailable, cause.Error())
	}
	s.fellBack(ctx, hook)
	switch s.mode {
	case Allow:
		for i := range reqs {
			m := reqs[i].Policy.Max()
			out[i] = ratelimit.Decision{Allowed: true, Limit: m, Remaining: m, Uncounted: true}
		}
		return true, nil
	case Deny:
		if cause == nil {
			return false, fmt.Errorf("fallback store: %w: circuit breaker open", ErrUnavailable)
		}
		// The cause is quoted, not wrapped: a store timeout must not pass
		// for the caller's own deadline (errors.Is context.DeadlineExceeded).
		return false, fmt.Errorf("fallback store: %w: %s", ErrUnavailable, cause.Error())
	}
	admitted, err := s.local.Evaluate(ctx, reqs, out)
	if err != nil {
		return false, fmt.Errorf("fallback store: local: %w", err)
	}
	if admitted {
		s.debts.charge(reqs, out)
	}
	return admitted, nil
}

// record consumes on the Local store what the primary just admitted, so the
// local state follows this instance's consumption. Each limit that consumed
// on the primary is sent as a shadow limit: it consumes on its own if it
// can, whatever the others do, and the local verdict is ignored.
func (s *Store) record(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) {
	sc := s.getScratch(len(reqs))
	for i, r := range reqs {
		if r.Shadow && !out[i].Allowed {
			continue // a shadow limit that would deny consumed nothing
		}
		r.Shadow = true
		sc.reqs = append(sc.reqs, r)
	}
	// The requests passed CheckRequests, so the memory store cannot fail.
	_, _ = s.local.Evaluate(ctx, sc.reqs, sc.out)
	s.putScratch(sc)
}

// Peek writes each limit's current state into out without consuming: from
// the primary while it works, else from the Local store; without one (Allow
// and Deny modes) it returns an error wrapping [ErrUnavailable]. Invalid
// requests and the caller's cancellation are returned as by Evaluate.
func (s *Store) Peek(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	if err := kit.CheckRequests(reqs, out); err != nil {
		return err
	}
	if len(reqs) == 0 {
		return nil
	}
	if s.inProcess {
		return s.primary.Peek(ctx, reqs, out)
	}
	done, err := s.cb.Allow()
	s.notify()
	var cause error
	if err == nil {
		pctx, cancel := context.WithTimeout(ctx, s.timeout)
		start := monoNow()
		cause = s.primary.Peek(pctx, reqs, out)
		cancel()
		fail, pass := s.outcome(ctx, done, cause, start)
		if pass != nil {
			return pass
		}
		if !fail {
			return nil
		}
	}
	if s.local == nil {
		if cause == nil {
			return fmt.Errorf("fallback store: peek: %w: circuit breaker open", ErrUnavailable)
		}
		return fmt.Errorf("fallback store: peek: %w: %s", ErrUnavailable, cause.Error())
	}
	return s.local.Peek(ctx, reqs, out)
}

// Reset restores each limit's full budget on the Local store (forgetting
// what the fallback admitted for those keys) and on the primary, whether or
// not the breaker is open, within Options.Timeout. It returns the primary's
// error, or the Local store's if that failed.
func (s *Store) Reset(ctx context.Context, reqs []ratelimit.Request) error {
	if s.local != nil {
		if err := s.local.Reset(ctx, reqs); err != nil {
			return fmt.Errorf("fallback store: local: %w", err)
		}
		s.debts.forgive(reqs)
	}
	if s.inProcess {
		return s.primary.Reset(ctx, reqs)
	}
	pctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.primary.Reset(pctx, reqs); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	return nil
}

// scratch is working space for one call.
type scratch struct {
	reqs []ratelimit.Request
	out  []ratelimit.Decision
}

// getScratch returns a scratch with len(out) == n and room for n requests.
func (s *Store) getScratch(n int) *scratch {
	sc, _ := s.scratches.Get().(*scratch)
	if sc == nil {
		sc = &scratch{}
	}
	if cap(sc.out) < n {
		sc.reqs = make([]ratelimit.Request, 0, n)
		sc.out = make([]ratelimit.Decision, n)
	}
	sc.reqs, sc.out = sc.reqs[:0], sc.out[:n]
	return sc
}

// putScratch returns sc to the pool, dropping its references to keys and
// policies.
func (s *Store) putScratch(sc *scratch) {
	clear(sc.reqs)
	sc.reqs = sc.reqs[:0]
	s.scratches.Put(sc)
}
