package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	"github.com/sluice-gw/sluice/gateway/admin"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/panichook"
	"github.com/sluice-gw/sluice/gateway/internal/tracing"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/fallback"
)

// The statuses the core answers with (net/http's names, which the core
// does not import).
const (
	statusOK                 = 200
	statusPermanentRedirect  = 308
	statusBadRequest         = 400
	statusForbidden          = 403
	statusNotFound           = 404
	statusTooManyRequests    = 429
	statusServiceUnavailable = 503
	statusHTTPVersion        = 505
	// StatusClientClosed is the status recorded for a request whose client
	// went away before its answer (nginx's 499); it is never sent.
	StatusClientClosed = 499
)

// Options are what a Table takes besides its configuration. Stores and
// Metrics are required; the other fields' zero values work.
type Options struct {
	// Store returns the store a route's limits decide on (store.on_error
	// applied inside it).
	Store func(route string) ratelimit.Store
	// Leases is the store that holds leases: concurrency limits' and load
	// shedding's.
	Leases ratelimit.LeaseStore
	// Clock is the time of X-RateLimit-Reset; nil means the system clock.
	Clock ratelimit.Clock
	// Metrics receives the decisions, requests and shedding counts.
	Metrics *metrics.Metrics
	// Stats, if not nil, feeds the dashboard's statistics.
	Stats *admin.Stats
	// Override is the admin API's per-key overrides hook
	// (httplimit.Options.Override); nil for none.
	Override func(ctx context.Context, route string, key []string) *ratelimit.Policy
	// Log receives store failures; nil discards them.
	Log *slog.Logger
	// AccessLog receives the access log records (server.access_log); nil
	// means Log.
	AccessLog *slog.Logger
	// Tracer traces requests; nil when tracing is off.
	Tracer *tracing.Tracer
}

// Table is one configuration's routes compiled: it decides each request of
// the public listener into an Outcome. It is immutable and safe for
// concurrent use.
type Table struct {
	cfg       *config.Config
	routes    []*Route
	ip        *httplimit.IPResolver
	metrics   *metrics.Metrics
	stats     *admin.Stats
	clock     ratelimit.Clock
	log       *slog.Logger
	accessLog *slog.Logger
	tracer    *tracing.Tracer
	// latency holds the upstreams' latency signals load shedding reads;
	// latencyKeys: load shedding by latency is on, and observe names each
	// request's client by its keys.
	latency     latencies
	latencyKeys bool
	// plaintext is server.tls.plaintext when it is redirect or refuse ("":
	// cleartext requests are served), and httpsPort the HTTPS listener's
	// port a redirect names.
	plaintext config.Plaintext
	httpsPort string
}

// Route is one configured route, compiled.
type Route struct {
	id    string
	index int    // in the table's routes
	path  string // match.path, the span's http.route
	match *matcher
	// upstream is a proxy route's upstream, nil for the others.
	upstream *Upstream
	// fixed is a respond route's answer, nil for the others.
	fixed *Fixed
	// mw and limits are the route's limits middleware and its limits (IDs
	// filled in), for the admin API; mw is nil when limits is empty.
	mw     *httplimit.Middleware
	limits []httplimit.Limit
	// fwd is a forward_auth route's reading of the original request, nil
	// for other routes.
	fwd *forwardAuth
	// denyStatus, when not 0, replaces the 429 of a rate-limited answer
	// (forward_auth.deny_status).
	denyStatus int
	// shed is the route's load shedding, nil without a shedding section.
	shed *routeShed
}

// ID returns the route's id.
func (rt *Route) ID() string { return rt.id }

// Index returns the route's position in its table (Table.Routes).
func (rt *Route) Index() int { return rt.index }

// ForwardAuth reports whether the route is a forward_auth route, whose
// answers are verdicts for a proxy, never the original request's.
func (rt *Route) ForwardAuth() bool { return rt.fwd != nil }

// Upstream returns a proxy route's upstream, nil for other routes.
func (rt *Route) Upstream() *Upstream { return rt.upstream }

// Limits returns the route's limits, IDs filled in, nil for none.
func (rt *Route) Limits() []httplimit.Limit { return rt.limits }

// Middleware returns the route's limits middleware, nil without limits.
func (rt *Route) Middleware() *httplimit.Middleware { return rt.mw }

// Upstream is where a proxy route forwards, and how.
type Upstream struct {
	// Target is the URL of the pool's first target (the route's upstream).
	Target       *url.URL
	StripPrefix  int
	PreserveHost bool
	Timeout      time.Duration
	// HTTP2: the upstream (every target of its pool) speaks HTTP/2 only
	// (h2c:// or h2://), which an engine forwards to only when it calls
	// Request.SetHTTP2Upstreams.
	HTTP2 bool
	// TLS is the route's upstream_tls, nil for none.
	TLS *config.UpstreamTLS
	// Latency is the latency signal of a pool of one target (a route's
	// upstream), which the proxy feeds, as Pool.Targets()[0].Latency; nil
	// when load shedding does not read it, and for a pool of several
	// targets, whose proxy feeds each Target's.
	Latency *LatencySignal
	// Pool is the route's targets (one for a route's upstream); never nil.
	Pool *Pool
}

// New compiles cfg's routes (a valid, defaulted configuration, as
// config.Load returns it). Every route that cannot be built is reported,
// joined.
func New(cfg *config.Config, o Options) (*Table, error) {
	if cfg == nil {
		return nil, errors.New("core: nil config")
	}
	t := &Table{cfg: cfg, metrics: o.Metrics, stats: o.Stats, clock: o.Clock, log: o.Log, accessLog: o.AccessLog, tracer: o.Tracer,
		latencyKeys: cfg.Shedding != nil && cfg.Shedding.LatencyThreshold > 0,
		ip:          &httplimit.IPResolver{TrustedProxies: cfg.Server.TrustedPrefixes()}}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	if t.accessLog == nil {
		t.accessLog = t.log
	}
	if t.clock == nil {
		t.clock = ratelimit.SystemClock{}
	}
	if tc := cfg.Server.TLS; tc != nil && (tc.Plaintext == config.PlaintextRedirect || tc.Plaintext == config.PlaintextRefuse) {
		t.plaintext = tc.Plaintext
		if _, port, ok := splitHostPort(tc.Listen); ok {
			t.httpsPort = port
		}
	}
	var errs []error
	for i := range cfg.Routes {
		rt, err := t.buildRoute(&cfg.Routes[i], o)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %q: %w", cfg.Routes[i].ID, err))
			continue
		}
		rt.index = len(t.routes)
		t.routes = append(t.routes, rt)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t.metrics.SetTargets(t.targetStates())
	return t, nil
}

// targetStates lists the targets of the routes with a pool section, for
// sluice_upstream_target_up.
func (t *Table) targetStates() []metrics.TargetState {
	var list []metrics.TargetState
	for i, rt := range t.routes {
		if rt.upstream == nil || t.cfg.Routes[i].Pool == nil {
			continue
		}
		for _, tg := range rt.upstream.Pool.Targets() {
			list = append(list, metrics.TargetState{Route: rt.id, Target: tg.URL.String(), Up: tg.Up})
		}
	}
	return list
}

// Routes returns the compiled routes, in configuration order.
func (t *Table) Routes() []*Route { return t.routes }

// IP returns the resolver of client addresses (server.trusted_proxies).
func (t *Table) IP() *httplimit.IPResolver { return t.ip }

// buildRoute compiles one route: matcher, limits middleware, and what it
// answers with (upstream, fixed answer or forward-auth verdict).
func (t *Table) buildRoute(rc *config.Route, o Options) (*Route, error) {
	rt := &Route{id: rc.ID, path: rc.Match.Path, match: newMatcher(rc.Match)}
	switch {
	case rc.ForwardAuth != nil:
		rt.fwd = newForwardAuth(rc.ForwardAuth, rc.StripPrefix)
		if s := rc.ForwardAuth.DenyStatus; s != statusTooManyRequests {
			rt.denyStatus = s
		}
	case rc.Respond != nil:
		rt.fixed = newFixed(rc.Respond)
	default:
		pool, err := t.newPool(rc)
		if err != nil {
			return nil, err
		}
		tg := pool.Targets()
		rt.upstream = &Upstream{Target: tg[0].URL, StripPrefix: rc.StripPrefix, PreserveHost: rc.PreserveHost, Timeout: rc.Timeout, Pool: pool,
			HTTP2: config.SchemeHTTP2(tg[0].URL.Scheme), TLS: rc.UpstreamTLS}
		if len(tg) == 1 {
			rt.upstream.Latency = tg[0].Latency
		}
	}
	limits, err := t.limits(rc)
	if err != nil {
		return nil, err
	}
	if len(limits) > 0 {
		rt.mw, err = httplimit.New(httplimit.Options{
			Route:        rc.ID,
			Limits:       limits,
			Store:        o.Store(rc.ID),
			Leases:       o.Leases,
			Clock:        o.Clock,
			IP:           t.ip,
			OnStoreError: t.onStoreError(rc.ID),
			Observe:      t.observe,
			Override:     o.Override,
		})
		if err != nil {
			return nil, err
		}
		rt.limits = rt.mw.Limits()
	}
	if rt.shed, err = t.newRouteShed(rc, o.Leases, rt.upstream); err != nil {
		return nil, err
	}
	return rt, nil
}

// limits converts a route's configured limits to the middleware's.
func (t *Table) limits(rc *config.Route) ([]httplimit.Limit, error) {
	var out []httplimit.Limit
	var errs []error
	policy := func(name string) *ratelimit.Policy {
		p := t.cfg.Policy(name)
		if p == nil {
			errs = append(errs, fmt.Errorf("unknown policy %q", name))
		}
		return p
	}
	for i, lc := range rc.Limits {
		l := httplimit.Limit{
			ID:         strconv.Itoa(i),
			Policy:     policy(lc.Policy),
			Key:        lc.Key,
			Cost:       lc.Cost,
			OnEmptyKey: lc.OnEmptyKey,
			Shadow:     lc.Shadow,
			SCGHeaders: lc.Headers == config.HeadersSCG,
			SCGRouteID: lc.SCGRouteID,
		}
		if len(lc.Overrides) > 0 {
			l.Overrides = make(map[string]*ratelimit.Policy, len(lc.Overrides))
			for k, name := range lc.Overrides {
				l.Overrides[k] = policy(name)
			}
		}
		if lc.Plans != nil {
			l.Plans = &httplimit.Plans{From: lc.Plans.From, Policies: make(map[string]*ratelimit.Policy, len(lc.Plans.Policies))}
			for plan, name := range lc.Plans.Policies {
				l.Plans.Policies[plan] = policy(name)
			}
		}
		out = append(out, l)
	}
	return out, errors.Join(errs...)
}

// observe counts each limit's verdict once (docs/semantics.md §6.5), feeds
// the dashboard's statistics, names the request's client for the upstream
// latency signal and fills in the access log entry.
func (t *Table) observe(r httplimit.Request, ev *httplimit.Event) {
	for i := range ev.Verdicts {
		v := &ev.Verdicts[i]
		t.metrics.Decision(ev.Route, v.Policy.Name(), v.Result)
	}
	if t.stats != nil {
		t.stats.Record(t.clock, ev)
	}
	pr, ok := r.(*Request)
	if ok && t.latencyKeys {
		if c := clientOfKeys(ev); c != 0 {
			pr.client = c
		}
	}
	t.observeAccess(r.Context(), ev)
	if ok {
		traceDecision(pr, ev)
	}
}

// FellBack records in a request's access log entry and span (ctx is the
// request's context) that on_error mode decided its limits in the place of
// the store of type store (store.type).
func FellBack(ctx context.Context, store string, mode fallback.Mode) {
	noteFallback(ctx, string(mode))
	traceFallback(ctx, store, string(mode))
}

// NoteSource records in a request's access log entry (ctx is the request's
// context) what decided its limits when it was not the store: source is
// the access log's "store" field.
func NoteSource(ctx context.Context, source string) { noteFallback(ctx, source) }

// onStoreError answers a store error the middleware could not decide past.
// The store (store/fallback around any primary) has applied on_error and
// counted it already: an error reaching here is a denial (deny mode, or
// local mode with no store more local) or not a store failure.
func (t *Table) onStoreError(routeID string) func(httplimit.Request, error) *httplimit.Problem {
	return func(_ httplimit.Request, err error) *httplimit.Problem {
		if errors.Is(err, fallback.ErrUnavailable) {
			// The store's failure was logged where it was seen (a Redis
			// breaker's opening once, an in-process store's each time); a
			// line for every request would turn an outage's traffic into
			// log volume. The access log still records each 503.
			t.log.Debug("store unavailable, denied", "route", routeID, "error", err)
		} else {
			t.log.Warn("store failed", "route", routeID, "on_error", t.cfg.Store.OnError, "error", err)
		}
		return storeUnavailable
	}
}

// storeUnavailable answers a request whose limits the store could not decide.
var storeUnavailable = &httplimit.Problem{Status: statusServiceUnavailable, Detail: "The rate-limit store is unavailable.", RetryAfter: 1}

// Outcome is the core's decision on one request, for the engine to carry
// out: forward it to its route's upstream (Forward), or answer it with
// Status, the headers and Body, or nothing at all (Gone: the client went
// away during a shape-mode hold). A request a route's limits decided
// carries their Result, whose rate-limit headers go on whatever answer the
// request gets, and the leases it holds until that answer ends.
type Outcome struct {
	// Route is the route that took the request, nil when none did.
	Route *Route
	// Admitted: the route's shedding and limits let the request through
	// (Forward, a fixed answer, or forward-auth's 200).
	Admitted bool
	// Forward: proxy the request to Route's upstream.
	Forward bool
	// Gone: the client went away; nothing is answered and the connection
	// is closed. The request is recorded as StatusClientClosed.
	Gone bool
	// Status and Body are the answer when neither Forward nor Gone. The
	// body is a problem+json document (httplimit.ProblemHeaders) unless
	// Fixed is set.
	Status int
	Body   []byte
	// Fixed, when not nil, is a respond route's answer: its headers go
	// on the answer, and Body is its body.
	Fixed *Fixed
	// Result is the limits' result, nil when no limit decided the request.
	Result *httplimit.Result
	// RetryAfter, when positive, is the Retry-After of the answer, in
	// seconds.
	RetryAfter int64
	// Location, when not "", is the answer's Location header (a redirect
	// to HTTPS).
	Location string
	// Close: close the connection after the answer.
	Close bool
	// Lease holds the request's leases (concurrency limits, shedding); the
	// engine releases it when the response has ended.
	Lease Held
}

// problem is an answer with a problem+json body.
func problem(status int, detail string) Outcome {
	return Outcome{Status: status, Body: httplimit.ProblemBody(status, detail)}
}

// Problem returns the Outcome of an answer the engine gives itself: status
// with a problem+json body carrying detail.
func Problem(status int, detail string) Outcome { return problem(status, detail) }

// Exchange is one request's working memory: the Request an engine fills in
// and what deciding it needs. Engines pool them; Clear readies one for
// the next request.
type Exchange struct {
	Req      Request
	res      httplimit.Result
	segments []string // the path's segments, for matching
	// fwd is the original request a forward_auth route reads, and
	// fwdSegments its path's segments.
	fwd         forwardedRequest
	fwdSegments []string
}

// Forwarded reports whether a forward_auth route has read the original
// request x describes (a panic past it is forward-auth's).
func (x *Exchange) Forwarded() bool { return x.fwd.Request != nil }

// Clear drops what x references, keeping its scratch memory.
func (x *Exchange) Clear() {
	x.Req.Clear()
	x.fwd = forwardedRequest{}
	clear(x.segments)
	clear(x.fwdSegments)
	x.res.Body = nil
}

// Decide decides the request x holds: its target and query are parsed (a
// malformed one is answered 400), the routes are tried in order, and the
// first that takes it decides it with its shedding and limits. A route
// whose upstream speaks HTTP/2 only answers 505, before its limits run,
// a request whose engine cannot forward to it (Request.SetHTTP2Upstreams).
// It calls the limits' Observe hook and holds a shape-mode delay before it
// returns.
func (t *Table) Decide(x *Exchange) Outcome {
	r := &x.Req
	if err := r.parseTarget(); err != nil {
		return problem(statusBadRequest, targetDetail(err))
	}
	if err := checkQuery(r.query); err != nil {
		return problem(statusBadRequest, "The query string cannot be parsed: "+err.Error()+".")
	}
	in := newInbound(r.host, r.escaped, r.path, x.segments[:0])
	x.segments = in.segments
	// forwardOnly: a forward_auth route took the auth request but not the
	// original request it describes. Only forward_auth routes are tried
	// past it, so that an auth request is never proxied or answered as
	// an ordinary one, which the proxy would take for a verdict.
	forwardOnly := false
	for _, rt := range t.routes {
		if forwardOnly && rt.fwd == nil || !rt.match.match(r, &in) {
			continue
		}
		if rt.fwd == nil && t.plaintext != "" && !r.secure {
			return t.cleartext(r, rt)
		}
		r.span.Route(rt.id, rt.path, r.method)
		if rt.fwd == nil {
			if rt.upstream != nil && rt.upstream.HTTP2 && !r.http2Upstreams {
				return Outcome{Route: rt, Status: statusHTTPVersion, Body: httplimit.ProblemBody(statusHTTPVersion, http2Only)}
			}
			return rt.decide(r, r, &x.res)
		}
		if out, ok := rt.decideForward(x); ok {
			return out
		}
		forwardOnly = true
	}
	if !forwardOnly && t.plaintext != "" && !r.secure {
		return t.cleartext(r, nil)
	}
	detail := "No route matches this request."
	switch {
	case forwardOnly:
		detail = "No forward_auth route matches the forwarded request."
	case in.refused != "":
		detail = "No route takes a path with " + in.refused + " (see the path rules in docs/operations.md)."
	case in.encodedSlash:
		detail = `No route matches this request: a path with an encoded "/" or "\" matches only routes with allow_encoded_slash (see the path rules in docs/operations.md).`
	}
	return problem(statusNotFound, detail)
}

// http2Only is the detail of the 505 that a request the engine serving it
// cannot forward to its route's HTTP/2-only upstream gets.
const http2Only = "This route's upstream speaks HTTP/2 only: send the request over HTTP/2 (h2c, prior knowledge) or HTTPS."

// cleartext answers a request of the cleartext listener that rt (nil:
// none) would take, under server.tls.plaintext redirect or refuse: a 308
// to its https URL, or a 403. Its limits are not run: the request is
// decided when it arrives over TLS.
func (t *Table) cleartext(r *Request, rt *Route) Outcome {
	url := httpsURL(r, t.httpsPort)
	if t.plaintext == config.PlaintextRedirect {
		if url == "" {
			return Outcome{Route: rt, Status: statusBadRequest, Body: httplimit.ProblemBody(statusBadRequest,
				"This listener redirects to HTTPS, and the request's Host cannot be redirected to.")}
		}
		return Outcome{Route: rt, Status: statusPermanentRedirect, Location: url}
	}
	detail := "This listener serves HTTPS only."
	if url != "" {
		detail = "This listener serves HTTPS only: use " + url + "."
	}
	return Outcome{Route: rt, Status: statusForbidden, Body: httplimit.ProblemBody(statusForbidden, detail)}
}

// decide runs the route's shedding and limits on view, the request they
// read (r itself, or the original request of a forward_auth route), and
// returns what r is answered with: the route's upstream, fixed answer or
// forward-auth verdict, or the refusal. The leases taken are in the
// Outcome, or released when none goes out (a refusal, or a panic).
func (rt *Route) decide(r *Request, view httplimit.Request, res *httplimit.Result) (out Outcome) {
	var lease Held
	kept := false
	defer func() {
		if !kept {
			lease.Release()
		}
	}()
	out.Route = rt
	if rt.shed != nil {
		l, reason := rt.shed.admit(view.Context(), func() uint64 {
			r.client = rt.clientOf(view)
			return r.client
		})
		if reason != "" {
			return rt.shed.shed(rt, reason)
		}
		lease[1] = l
	}
	if rt.mw == nil {
		kept = true
		return rt.admit(nil, lease)
	}
	rt.mw.Decide(view, res)
	if res.Forward {
		lease[0] = rt.mw.Hold(res)
		if panichook.Hook != nil {
			panichook.Hook("decide", r.wire)
		}
		kept = true
		return rt.admit(res, lease)
	}
	if res.Status == 0 { // the client went away during a shape-mode hold
		r.status = StatusClientClosed
		return Outcome{Route: rt, Gone: true, Close: true}
	}
	status := res.Status
	if status == statusTooManyRequests && rt.denyStatus != 0 {
		status = rt.denyStatus
	}
	return Outcome{Route: rt, Status: status, Body: res.Body, Result: res, RetryAfter: res.RetryAfter}
}

// admit is the Outcome of a request the limits let through (res nil
// without limits), holding lease.
func (rt *Route) admit(res *httplimit.Result, lease Held) Outcome {
	out := Outcome{Route: rt, Admitted: true, Result: res, Lease: lease}
	switch {
	case rt.upstream != nil:
		out.Forward = true
	case rt.fixed != nil:
		out.Status, out.Body, out.Fixed = rt.fixed.Status, rt.fixed.Body, rt.fixed
	default: // forward_auth: 200, no body, with the rate-limit headers for the proxy to copy
		out.Status = statusOK
	}
	return out
}
