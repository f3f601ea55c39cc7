package httplimit

import (
	"context"
	"slices"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Evaluated is the outcome of one request's store call (Store.Evaluate of
// all its limits), as every engine that serves limits turns it into the
// answer and the [Event]: [Middleware.Decide] settles its store call
// through it, and an engine that asks the store itself (sluice's Envoy rate
// limit service) fills one in and calls Settle, so that it sends the same
// headers, reports the same verdicts and outcome, and holds a shape-mode
// request the same way. An Evaluated may be reused for another request:
// Settle keeps its working memory.
type Evaluated struct {
	// Requests are the store requests, in limit order.
	Requests []ratelimit.Request
	// Decisions are the store's decisions, Decisions[j] for Requests[j].
	Decisions []ratelimit.Decision
	// Verdicts has one entry per request, Verdicts[j] for Requests[j]: the
	// caller sets LimitID, Key and Anonymous, and Settle fills in Policy,
	// Shadow, Result and Decision (from Requests[j] and Decisions[j]) and
	// drops Key when Anonymous.
	Verdicts []Verdict
	// Admitted and Err are what the store call returned.
	Admitted bool
	Err      error
	// At is the time the decisions' Reset counts from: the store's, best
	// read just before the call and cut to the microsecond.
	At time.Time
	// Leases is the store the leases of admitted concurrency requests are
	// renewed on while shape mode holds the request, and given back on if
	// the client goes away meanwhile. Nil when no request takes a lease.
	Leases ratelimit.LeaseStore

	evals    []outcome
	violated []string
	// policyField, if not nil, is the RateLimit-Policy value of the
	// evaluations, formatted before (Middleware.defaultPolicyField).
	policyField []byte
}

// Settle resets res and ev.Verdicts, ev.Outcome, ev.Delay and ev.Err, and
// fills them in from e as [Middleware.Decide] does, then calls observe (if
// not nil) with ev, once:
//
//   - e.Err not nil: ev.Outcome is OutcomeStoreError and ev.Err the error;
//     res stays empty, for the caller to answer as its store's on_error
//     says.
//   - e.Admitted false: OutcomeLimited; res carries the rate-limit headers,
//     Status 429, RetryAfter (the longest RetryAfter of a denying limit in
//     whole seconds, at least 1) and the problem body naming the violated
//     policies.
//   - e.Admitted: res carries the rate-limit headers and the leases of the
//     admitted concurrency requests ([Middleware.Hold]); ev.Delay is the
//     longest shape-mode Delay of an allowed non-shadow limit, and Settle
//     holds the request that long before it returns. ev.Outcome is then
//     OutcomeAdmitted and res.Forward true, or, when ctx ended or watch
//     (if not nil) saw the client leave first, OutcomeAbandoned with
//     res.Status 0 and the leases given back.
//
// ev.Route is the caller's to set. ev.Verdicts is e.Verdicts except after
// a store error, when it is nil.
func (e *Evaluated) Settle(ctx context.Context, watch ClientWatcher, res *Result, ev *Event, observe func(*Event)) {
	res.reset()
	ev.Verdicts, ev.Outcome, ev.Delay, ev.Err = nil, "", 0, nil
	var client any
	if watch != nil {
		client = watch
	}
	e.settle(ctx, client, res, ev, observe)
}

// settle is Settle on a Result and an Event already reset (the
// middleware resets them once per request; each pointer written again
// costs a write barrier while the GC marks). client is asked for a
// ClientWatcher only when shape mode holds the request, so that the
// middleware passes its Request as it is, without a type assertion on
// every request.
func (e *Evaluated) settle(ctx context.Context, client any, res *Result, ev *Event, observe func(*Event)) {
	if e.Err != nil {
		ev.Outcome, ev.Err = OutcomeStoreError, e.Err
		emit(observe, ev)
		return
	}
	retry, delay := e.collect()
	ev.Verdicts = e.Verdicts
	res.setRateLimitHeaders(e.At, e.evals, e.Admitted, e.policyField)
	if !e.Admitted {
		ev.Outcome = OutcomeLimited
		emit(observe, ev)
		n := retryAfterSeconds(retry)
		res.refuse(tooManyRequests(n, e.violated), n)
		return
	}
	for j := range e.Requests {
		if q := &e.Requests[j]; q.Policy.IsConcurrency() && e.Decisions[j].Allowed {
			res.leases = append(res.leases, *q)
		}
	}
	ev.Delay = delay
	if delay > 0 {
		// The leases are renewed during the hold, which may outlast
		// their TTL; Middleware.Hold then hands them on.
		if e.Leases != nil {
			res.held = res.takeLeases(e.Leases)
		}
		watch, _ := client.(ClientWatcher)
		if !hold(ctx, watch, delay) {
			ev.Outcome = OutcomeAbandoned
			emit(observe, ev)
			res.held.Release() //nolint:errcheck // an unreleased lease expires
			res.held = nil
			clear(res.leases) // held on no store: they expire
			res.leases = res.leases[:0]
			return
		}
	}
	ev.Outcome = OutcomeAdmitted
	emit(observe, ev)
	res.Forward = true
}

// collect fills in e.Verdicts and turns the decisions into header inputs
// and the violated policies; it returns the longest RetryAfter among
// denying limits and the longest shape-mode Delay among allowed non-shadow
// ones.
func (e *Evaluated) collect() (retry, delay time.Duration) {
	e.evals, e.violated = e.evals[:0], e.violated[:0]
	for j := range e.Requests {
		q, d, v := &e.Requests[j], e.Decisions[j], &e.Verdicts[j]
		e.evals = append(e.evals, outcome{policy: q.Policy, d: d, cost: max(1, q.Cost), shadow: q.Shadow})
		v.Policy, v.Shadow, v.Decision = q.Policy, q.Shadow, d
		if v.Anonymous {
			v.Key = nil
		}
		v.Result = ratelimit.VerdictOf(*q, d)
		switch v.Result {
		case ratelimit.Allowed:
			if !q.Shadow {
				delay = max(delay, d.Delay)
			}
		case ratelimit.Denied:
			retry = max(retry, d.RetryAfter)
			if !slices.Contains(e.violated, q.Policy.Name()) {
				e.violated = append(e.violated, q.Policy.Name())
			}
		}
	}
	return retry, delay
}

func emit(observe func(*Event), ev *Event) {
	if observe != nil {
		observe(ev)
	}
}

// ClientWatcher is implemented by a Request whose context does not end when
// the client goes away (an engine that does not watch its connections while
// a handler runs). A shape-mode hold then also ends when the channel
// WatchClient returns is closed; stop ends the watch and is called once the
// hold is over.
type ClientWatcher interface {
	WatchClient() (gone <-chan struct{}, stop func())
}

// hold waits d, as shape mode requires before forwarding, and reports
// whether the wait completed; false means the client went away first: ctx
// ended, or watch (if not nil) saw the client leave.
func hold(ctx context.Context, watch ClientWatcher, d time.Duration) bool {
	var gone <-chan struct{}
	if watch != nil {
		var stop func()
		gone, stop = watch.WatchClient()
		defer stop()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-gone:
		return false
	}
}
