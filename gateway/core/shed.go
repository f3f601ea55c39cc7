package core

import (
	"context"
	"math"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// Load shedding (the shedding section; docs/operations.md, "Load
// shedding"). Every request of a route takes, before its limits, a lease
// on one fleet-wide key shared through the store: a concurrency limit
// whose limit is the request's priority's share of shedding.max_in_flight.
// All priorities count on the same leases, so when the fleet's requests in
// flight reach a priority's share, that priority is shed while the ones
// with a larger share still pass: the budget above the low share is kept
// for normal and up, and so on up to critical. With latency_threshold, a
// request is also shed while its upstream's latency (latencySignal; for a
// pool, the lowest among its targets in rotation: Pool.shedSignal) is at
// or above its priority's multiple of the threshold. A shed request is
// answered 503 with Retry-After; it takes no lease and is not counted by
// the limits.

// shedKey is the fleet-wide key of the in-flight budget. Route state keys
// begin with their route id, which has no NUL.
const shedKey = "\x00shedding\x00in_flight"

// Shedding reasons: the `reason` label of sluice_shed_total.
const (
	shedInFlight = "in_flight"
	shedLatency  = "latency"
)

// shedRetryAfter is the Retry-After of a shed request, in seconds.
const shedRetryAfter = 1

// latencyFactor is how many latency thresholds a priority's upstream
// latency may reach before the priority is shed; critical is never shed
// for latency.
var latencyFactor = map[string]float64{
	config.PriorityLow: 1, config.PriorityNormal: 2, config.PriorityHigh: 4, config.PriorityCritical: math.Inf(1),
}

// routeShed is one route's part in load shedding.
type routeShed struct {
	route, priority string
	store           ratelimit.LeaseStore
	policy          *ratelimit.Policy // the priority's share as a concurrency limit
	// pool is the route's upstream pool, whose shedSignal is read; nil
	// for routes without one.
	pool *Pool
	// slow is the upstream latency at or above which the route is shed;
	// zero: never for latency.
	slow    time.Duration
	metrics interface {
		Shed(route, priority, reason string)
	}
	onShed func(route string)
	// ip resolves the client address that names a client without
	// rate-limit keys in the latency signal.
	ip *httplimit.IPResolver
}

// newRouteShed builds route rc's shedding, or returns nil without a
// shedding section and for a forward_auth route.
func (t *Table) newRouteShed(rc *config.Route, leases ratelimit.LeaseStore, up *Upstream) (*routeShed, error) {
	s := t.cfg.Shedding
	if s == nil || rc.ForwardAuth != nil {
		// A forward_auth route answers before the request it describes
		// runs: it cannot hold a place in the budget for it.
		return nil, nil
	}
	prio := rc.Priority
	if prio == "" {
		prio = config.PriorityNormal
	}
	p, err := ratelimit.NewPolicy(ratelimit.PolicyConfig{Name: "shedding", Algorithm: ratelimit.Concurrency,
		Limit: s.Ceiling(prio), LeaseTTL: s.LeaseTTL})
	if err != nil {
		return nil, err
	}
	// The shared store, timed, without the route's fallback counting: a
	// request's limits are counted there once, not again for its place in
	// the budget.
	rs := &routeShed{route: rc.ID, priority: prio, store: leases, policy: p, metrics: t.metrics, ip: t.ip}
	if st := t.stats; st != nil {
		rs.onShed = st.RecordShed
	}
	if th := s.LatencyThreshold; th > 0 && up != nil {
		rs.pool = up.Pool
		if f := latencyFactor[prio]; !math.IsInf(f, 1) {
			rs.slow = time.Duration(f * float64(th))
		}
	}
	return rs, nil
}

// admit decides whether the request goes on: it returns the lease it took
// on the fleet budget (nil if none was taken) and "", or the reason it is
// shed. A store error sheds nothing: shedding protects the fleet, it does
// not replace store.on_error, which the route's limits follow.
//
// client names the request's client for the latency signal; it is called
// only when the upstream is slow for the request's priority.
func (s *routeShed) admit(ctx context.Context, client func() uint64) (*httplimit.Lease, string) {
	if s.slow > 0 {
		if l := s.pool.shedSignal(); l.get() >= s.slow && !l.newcomer(client()) && !l.probe() {
			return nil, shedLatency
		}
	}
	reqs := []ratelimit.Request{{Key: shedKey, Policy: s.policy, Lease: httplimit.NewLeaseID()}}
	var out [1]ratelimit.Decision
	ok, err := s.store.Evaluate(ctx, reqs, out[:])
	switch {
	case err != nil:
		return nil, ""
	case !ok:
		return nil, shedInFlight
	}
	return httplimit.HoldLeases(s.store, reqs), ""
}

// shed is the answer to a request of route rt shed for reason: 503 with
// Retry-After, counted.
func (s *routeShed) shed(rt *Route, reason string) Outcome {
	s.metrics.Shed(s.route, s.priority, reason)
	if s.onShed != nil {
		s.onShed(s.route)
	}
	detail := "The service is overloaded; requests of priority " + s.priority + " are shed for now."
	if reason == shedLatency {
		detail = "The upstream is slow; requests of priority " + s.priority + " are shed for now."
	}
	out := problem(statusServiceUnavailable, detail)
	out.Route, out.RetryAfter = rt, shedRetryAfter
	return out
}

// Held is the leases one request holds: its route limits' and its place in
// the shedding budget. Release gives back both; the zero value holds none.
type Held [2]*httplimit.Lease

// Release gives back every lease h holds.
func (h Held) Release() {
	for _, l := range h {
		l.Release() //nolint:errcheck // an unreleased lease expires
	}
}
