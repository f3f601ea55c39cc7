package httplimit

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Middleware rate-limits an http.Handler: it resolves each limit's key,
// evaluates all limits in one store call, sets the rate-limit headers and
// either forwards the request or answers 429 (docs/semantics.md §5). Create
// one with New; it is safe for concurrent use.
type Middleware struct {
	route  string
	limits []Limit
	// policyField is the RateLimit-Policy value of a request each limit
	// decided under its own Policy, every one counted (see
	// Result.setRateLimitHeaders): the common case, formatted once.
	policyField  []byte
	store        ratelimit.Store
	leases       ratelimit.LeaseStore // see Options.Leases
	clock        ratelimit.Clock
	rv           resolver
	override     func(ctx context.Context, route string, key []string) *ratelimit.Policy
	onStoreError func(r Request, err error) *Problem
	observe      func(r Request, ev *Event)
	scratch      sync.Pool // *scratch
	results      sync.Pool // *Result, for Handler
}

// scratch is the per-request working memory, pooled so that a request
// allocates little beyond its state keys.
type scratch struct {
	parts   [][]string // resolved key parts per limit
	anon    []bool     // per limit
	out     []ratelimit.Decision
	limitOf []int // limit index of each request
	// dec holds the store requests (Requests) and their limits' identity
	// (Verdicts) as they are built, and settles the store's answer; it
	// stays in the scratch, so that a request writes only what changes.
	dec Evaluated
	buf []byte
	ev  Event
}

// storeUnavailable is the default answer to a store error.
var storeUnavailable = &Problem{Status: http.StatusServiceUnavailable, Detail: "Rate limit store unavailable.", RetryAfter: 1}

// New validates o and returns the middleware. Every problem is reported,
// joined, each wrapping ErrInvalidOptions.
func New(o Options) (*Middleware, error) {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOptions}, args...)...))
	}
	if o.Store == nil {
		bad("store is required")
	}
	if o.IP != nil {
		for i, p := range o.IP.TrustedProxies {
			if !p.IsValid() {
				bad("ip.trusted_proxies[%d]: invalid prefix", i)
			}
		}
		if o.IP.IPv6PrefixLen < 0 || o.IP.IPv6PrefixLen > 128 {
			bad("ip.ipv6_prefix_len: %d outside 0..128", o.IP.IPv6PrefixLen)
		}
	}
	limits := make([]Limit, len(o.Limits))
	ids := make(map[string]int, len(o.Limits))
	for i, l := range o.Limits {
		if l.ID == "" {
			l.ID = strconv.Itoa(i)
		}
		if j, dup := ids[l.ID]; dup {
			bad("limits[%d]: id %q already used by limits[%d]", i, l.ID, j)
		}
		ids[l.ID] = i
		for _, msg := range checkLimit(&l) {
			bad("limits[%d]: %s", i, msg)
		}
		if _, ok := o.Store.(ratelimit.LeaseStore); o.Store != nil && !ok && usesLeases(&l) {
			bad("limits[%d]: a concurrency policy needs a store that holds leases (ratelimit.LeaseStore), not %T", i, o.Store)
		}
		limits[i] = l
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	defaults := make([]outcome, 0, len(limits))
	for i := range limits {
		l := &limits[i]
		l.keyPrefix = appendStateKeyPrefix(nil, o.Route, l.ID, l.Policy.Name())
		defaults = append(defaults, outcome{policy: l.Policy, shadow: l.Shadow})
	}
	m := &Middleware{
		route:        o.Route,
		limits:       limits,
		store:        o.Store,
		leases:       o.Leases,
		clock:        o.Clock,
		rv:           resolver{route: o.Route, ip: o.IP},
		override:     o.Override,
		onStoreError: o.OnStoreError,
		observe:      o.Observe,
		policyField:  appendPolicyField(nil, defaults),
	}
	if m.leases == nil {
		m.leases, _ = o.Store.(ratelimit.LeaseStore)
	}
	if m.clock == nil {
		m.clock = ratelimit.SystemClock{}
	}
	if m.onStoreError == nil {
		m.onStoreError = defaultOnStoreError
	}
	n := len(limits)
	m.scratch.New = func() any {
		return &scratch{
			parts:   make([][]string, n),
			anon:    make([]bool, n),
			out:     make([]ratelimit.Decision, n),
			limitOf: make([]int, 0, n),
			dec: Evaluated{
				Requests: make([]ratelimit.Request, 0, n),
				Verdicts: make([]Verdict, 0, n),
				Leases:   m.leases,
				evals:    make([]outcome, 0, n),
			},
		}
	}
	return m, nil
}

// checkLimit returns what is wrong with l, one message per problem.
func checkLimit(l *Limit) []string {
	var msgs []string
	if l.Policy == nil {
		msgs = append(msgs, "policy is required")
	}
	if len(l.Key) == 0 {
		msgs = append(msgs, "key is required")
	}
	for j, p := range l.Key {
		if !p.valid() {
			msgs = append(msgs, fmt.Sprintf("key[%d]: invalid part %s", j, p))
		}
	}
	if l.Cost < 0 {
		msgs = append(msgs, fmt.Sprintf("cost must be at least 1, got %d", l.Cost))
	}
	if l.OnEmptyKey > EmptyKeySkip {
		msgs = append(msgs, fmt.Sprintf("on_empty_key: %s", l.OnEmptyKey))
	}
	cost := max(1, l.Cost)
	checkPolicy := func(where string, p *ratelimit.Policy) {
		switch {
		case p == nil:
			msgs = append(msgs, where+": policy is nil")
		case p.Compat() == ratelimit.CompatSCG && l.SCGRouteID == "":
			msgs = append(msgs, fmt.Sprintf("%s: policy %q has compat scg (Spring Cloud Gateway 4.2.0 and later, whose keys name the route): scg_route_id is required", where, p.Name()))
		case p.Compat() == ratelimit.CompatSCG41 && l.SCGRouteID != "":
			msgs = append(msgs, fmt.Sprintf("%s: policy %q has compat scg-4.1 (Spring Cloud Gateway up to 4.1.x, whose keys do not name the route): scg_route_id must be empty", where, p.Name()))
		case p.IsConcurrency() && cost != 1:
			msgs = append(msgs, fmt.Sprintf("%s: cost %d on concurrency policy %q (a request holds one slot)", where, cost, p.Name()))
		case cost > p.Max():
			msgs = append(msgs, fmt.Sprintf("%s: cost %d above the %d of policy %q", where, cost, p.Max(), p.Name()))
		}
	}
	if l.Policy != nil {
		checkPolicy("policy", l.Policy)
	}
	if len(l.Overrides) > 0 && len(l.Key) != 1 {
		msgs = append(msgs, fmt.Sprintf("overrides apply only to single-part keys, key has %d parts", len(l.Key)))
	}
	for k, p := range l.Overrides {
		checkPolicy(fmt.Sprintf("overrides[%q]", k), p)
	}
	if l.Plans != nil {
		if !l.Plans.From.valid() {
			msgs = append(msgs, fmt.Sprintf("plans.from: invalid part %s", l.Plans.From))
		}
		for k, p := range l.Plans.Policies {
			checkPolicy(fmt.Sprintf("plans.policies[%q]", k), p)
		}
	}
	return msgs
}

func defaultOnStoreError(Request, error) *Problem { return storeUnavailable }

// Limits returns a copy of the limits, with every ID filled in.
func (m *Middleware) Limits() []Limit { return append([]Limit(nil), m.limits...) }

// PolicyFor returns the policy in force for the key value parts on limit i,
// as far as it does not depend on the request: Options.Override, then the
// limit's Overrides, then its Policy. Plans are not consulted. It panics if i
// is out of range.
func (m *Middleware) PolicyFor(ctx context.Context, i int, parts []string) *ratelimit.Policy {
	l := &m.limits[i]
	if p := m.dynamicOverride(ctx, l, parts); p != nil {
		return p
	}
	if len(parts) == 1 {
		if p := l.Overrides[parts[0]]; p != nil {
			return p
		}
	}
	return l.Policy
}

// policyFor is PolicyFor with plans, for a request.
func (m *Middleware) policyFor(r Request, l *Limit, parts []string, anon bool) *ratelimit.Policy {
	if !anon {
		if p := m.dynamicOverride(r.Context(), l, parts); p != nil {
			return p
		}
		if len(l.Overrides) > 0 {
			if p := l.Overrides[parts[0]]; p != nil {
				return p
			}
		}
	}
	if l.Plans != nil {
		if p := l.Plans.Policies[m.rv.value(&l.Plans.From, r)]; p != nil {
			return p
		}
	}
	return l.Policy
}

func (m *Middleware) dynamicOverride(ctx context.Context, l *Limit, parts []string) *ratelimit.Policy {
	if m.override == nil {
		return nil
	}
	p := m.override(ctx, m.route, parts)
	if p == nil || max(1, l.Cost) > p.Max() || !CanUse(l, p, parts) {
		return nil
	}
	return p
}

// Handler returns next wrapped by the middleware: the net/http adapter of
// Decide. m.Handler is a func(http.Handler) http.Handler, so it plugs into
// any middleware chain.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return &handler{m: m, next: next}
}

type handler struct {
	m    *Middleware
	next http.Handler
}

// ServeHTTP decides r, then forwards it or answers 403, 429 or 503.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := h.m
	if len(m.limits) == 0 {
		h.next.ServeHTTP(w, r)
		return
	}
	res, _ := m.results.Get().(*Result)
	if res == nil {
		res = new(Result)
	}
	m.Decide(HTTPRequest(r), res)
	WriteResult(w, res)
	forward := res.Forward
	lease := m.Hold(res)
	res.Body = nil
	m.results.Put(res)
	if forward {
		defer lease.Release() //nolint:errcheck // an unreleased lease expires
		h.next.ServeHTTP(w, r)
	}
}

// Decide decides r against every limit and fills in res (reset first): the
// rate-limit headers, and whether r goes on or is answered 403, 429, 503
// (or as OnStoreError says). A request admitted on concurrency limits
// holds leases: the caller takes them over with Hold and
// releases them when the response has ended. It calls Options.Observe once, and holds r for
// a shape-mode delay before it returns. It is the engine-neutral core of
// the middleware: Handler is its net/http adapter, and the gateway has one
// for its own listener.
func (m *Middleware) Decide(r Request, res *Result) {
	res.reset()
	if len(m.limits) == 0 {
		res.Forward = true
		return
	}
	sc := m.scratch.Get().(*scratch)
	m.decide(r, sc, res)
	m.release(sc)
}

// release clears what sc references and returns it to the pool.
func (m *Middleware) release(sc *scratch) {
	clear(sc.dec.Requests)
	clear(sc.dec.Verdicts)
	sc.dec.Err = nil
	for i := range sc.parts {
		clear(sc.parts[i])
	}
	sc.ev = Event{}
	m.scratch.Put(sc)
}

// decide is Decide with its scratch memory.
func (m *Middleware) decide(r Request, sc *scratch, res *Result) {
	e := &sc.dec
	e.Requests, e.Verdicts, sc.limitOf = e.Requests[:0], e.Verdicts[:0], sc.limitOf[:0]
	sc.ev = Event{Route: m.route}
	for i := range m.limits {
		if l := &m.limits[i]; !m.addRequest(r, l, sc, i) {
			sc.ev.Outcome, sc.ev.ForbiddenLimit = OutcomeForbidden, l.ID
			m.emit(r, &sc.ev)
			res.refuse(plainProblem(http.StatusForbidden, "The request has no value for rate-limit key "+l.Key.String()+"."), 0)
			return
		}
	}
	if len(e.Requests) == 0 {
		sc.ev.Outcome = OutcomeAdmitted
		m.emit(r, &sc.ev)
		res.Forward = true
		return
	}
	// The time the decision's Reset counts from is the store's, taken during
	// the call in whole microseconds: the clock read just before it, cut to
	// the microsecond, is the closest one at hand that is not later. Read
	// after the call instead, it made every window that ends on a whole
	// second (fixed_window, W a whole number of seconds) report
	// X-RateLimit-Reset one second late.
	before := m.clock.Now().Truncate(time.Microsecond)
	ctx := r.Context()
	e.Decisions = sc.out[:len(e.Requests)]
	admitted, err := m.store.Evaluate(ctx, e.Requests, e.Decisions)
	e.Admitted, e.Err, e.At = admitted, err, before
	if err == nil { // settle reads policyField only then
		e.policyField = m.defaultPolicyField(sc)
	}
	e.settle(ctx, r, res, &sc.ev, func(ev *Event) { m.emit(r, ev) })
	if err != nil {
		if p := m.onStoreError(r, err); p != nil {
			res.refuse(plainProblem(p.Status, p.Detail), p.RetryAfter)
		} else {
			res.Forward = true
			m.setSCGHeaders(sc, res, false)
		}
		return
	}
	m.setSCGHeaders(sc, res, true)
}

// defaultPolicyField returns m.policyField when sc's requests are each
// limit's, in order, under its own Policy and counted, which the field
// describes; else nil.
func (m *Middleware) defaultPolicyField(sc *scratch) []byte {
	reqs := sc.dec.Requests
	if len(reqs) != len(m.limits) {
		return nil // a limit was skipped
	}
	for j := range reqs {
		if reqs[j].Policy != m.limits[j].Policy || sc.out[j].Uncounted {
			return nil
		}
	}
	return m.policyField
}

// addRequest resolves limit i's key and policy and appends its store request
// to sc.dec.Requests, or nothing if the limit is skipped. It returns false if the key
// is empty and the limit denies such requests.
func (m *Middleware) addRequest(r Request, l *Limit, sc *scratch, i int) bool {
	empty := m.resolve(r, l, sc, i)
	sc.anon[i] = false
	if empty {
		switch l.OnEmptyKey {
		case EmptyKeySkip:
			return true
		case EmptyKeyAnonymous:
			sc.anon[i] = true
		default:
			return false
		}
	}
	p := m.policyFor(r, l, sc.parts[i], sc.anon[i])
	if key, ok := scgKey(l, p, sc.parts[i]); ok && !sc.anon[i] {
		// Spring Cloud Gateway's budget of this key value (BudgetKey).
		sc.dec.Requests = append(sc.dec.Requests, ratelimit.Request{Key: key, Policy: p, Cost: l.Cost, Shadow: l.Shadow})
		sc.limitOf = append(sc.limitOf, i)
		sc.addVerdict(l, i)
		return true
	}
	if p == l.Policy {
		sc.buf = append(sc.buf[:0], l.keyPrefix...)
	} else {
		sc.buf = appendStateKeyPrefix(sc.buf[:0], m.route, l.ID, p.Name())
	}
	if sc.anon[i] {
		sc.buf = append(sc.buf, anonymousMarker)
	} else {
		for _, v := range sc.parts[i] {
			sc.buf = appendLenPrefixed(sc.buf, v)
		}
	}
	q := ratelimit.Request{Key: string(sc.buf), Policy: p, Cost: l.Cost, Shadow: l.Shadow}
	if p.IsConcurrency() {
		q.Lease = NewLeaseID()
	}
	sc.dec.Requests = append(sc.dec.Requests, q)
	sc.limitOf = append(sc.limitOf, i)
	sc.addVerdict(l, i)
	return true
}

// addVerdict appends the verdict of limit l (index i) to sc.dec.Verdicts
// with its identity alone: Evaluated.settle writes every other field, so
// the element is not zeroed first (its capacity is one per limit).
func (sc *scratch) addVerdict(l *Limit, i int) {
	vs := sc.dec.Verdicts
	j := len(vs)
	vs = vs[:j+1]
	sc.dec.Verdicts = vs
	v := &vs[j]
	v.LimitID, v.Key, v.Anonymous = l.ID, sc.parts[i], sc.anon[i]
}

// resolve writes limit i's key parts into sc.parts[i] and reports whether the
// key is empty (some part is).
func (m *Middleware) resolve(r Request, l *Limit, sc *scratch, i int) (empty bool) {
	parts := sc.parts[i][:0]
	for j := range l.Key {
		v := m.rv.value(&l.Key[j], r)
		if v == "" {
			empty = true
		}
		parts = append(parts, v)
	}
	sc.parts[i] = parts
	return empty
}

func (m *Middleware) emit(r Request, ev *Event) {
	if m.observe != nil {
		m.observe(r, ev)
	}
}
