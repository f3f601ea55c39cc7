package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/gateway/admin"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/tracing"
	"github.com/sluice-gw/sluice/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/rls"
	"github.com/sluice-gw/sluice/store/fallback"
	"github.com/sluice-gw/sluice/store/redis"
)

// Deps are what a Gateway takes from its surroundings rather than from the
// configuration. The zero value works.
type Deps struct {
	// Logger receives the gateway's logs; nil discards them.
	Logger *slog.Logger
	// Registry receives the gateway's metrics and is what the admin
	// listener's /metrics serves. Nil means a fresh registry with the Go and
	// process collectors. Pass the same registry to every gateway of one
	// process (Gateway.Registry returns it), so counters survive reloads.
	Registry *prometheus.Registry
	// Store, if not nil, replaces the store the configuration describes (for
	// tests). The gateway never closes it.
	Store ratelimit.Store
	// Previous is the gateway this one replaces on reload, or nil. When the
	// store section of both configurations is the same, the new gateway
	// shares the old one's store, so a reload keeps every key's budget (an
	// in-memory store would otherwise start from scratch). The store is
	// closed when the last gateway using it is closed. The new gateway also
	// takes over the panic sites already logged with their stack
	// (docs/operations.md, "Panics").
	Previous *Gateway
	// Clock is the memory store's clock and the time of X-RateLimit-Reset;
	// nil means the system clock.
	Clock ratelimit.Clock
	// AccessLogger receives the access log records (server.access_log);
	// nil means Logger.
	AccessLogger *slog.Logger
	// Reload, if not nil, reloads the configuration the way SIGHUP does;
	// the admin API's POST /admin/v1/reload calls it (nil: that endpoint
	// answers 404). It returns the problems of a configuration that was
	// not swapped in, one per line, as `sluice check` prints them.
	Reload func(ctx context.Context) (ReloadResult, error)
	// Build names the running build for sluice_build_info (and the
	// service.version of traces); the zero value leaves that metric out.
	Build BuildInfo
	// Tracer, if not nil, replaces the tracer the tracing section
	// describes (for tests). The gateway never shuts it down.
	Tracer *tracing.Tracer
}

// ReloadResult is what a successful reload reports to the admin API.
type ReloadResult = admin.ReloadResult

// BuildInfo names a build as `sluice version` prints it.
type BuildInfo struct {
	Version, Commit, Go string
}

// Gateway is one configuration turned into a handler: the routes with their
// limits and upstreams, the admin endpoints and the store. Building it dials
// nothing. It is safe for concurrent use; Close releases the store once no
// request uses it.
type Gateway struct {
	cfg      *config.Config
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *metrics.Metrics
	store    *sharedStore
	routes   []*route
	// rls is Envoy's rate limit service over the same store, nil without
	// an rls section.
	rls   *rls.Service
	admin http.Handler
	// ups are the upstream connection pools shared by the proxy routes;
	// Close closes their idle connections.
	ups *upstreams
	// maxHeaderBytes bounds the request line and headers together; larger
	// requests get a JSON 431 (docs/operations.md, "Answers sluice gives itself").
	maxHeaderBytes int
	clock          ratelimit.Clock
	stats          *admin.Stats
	logins         *admin.Logins
	accessLog      *slog.Logger
	reload         func(context.Context) (ReloadResult, error)
	// tracer traces public requests; nil when tracing is off. ownTracer:
	// built from the configuration, so Close shuts it down.
	tracer    *tracing.Tracer
	ownTracer bool
	// inflight counts requests being served by this gateway; see Server.
	inflight atomic.Int64
	closed   atomic.Bool
	// latency holds the upstreams' latency signals load shedding reads;
	// latencyKeys: load shedding by latency is on, and observe names each
	// request's client by its keys.
	latency     latencies
	latencyKeys bool
	// panics records the panics recovered while serving requests.
	panics *panics
}

// route is one configured route, compiled.
type route struct {
	id    string
	path  string // match.path, the span's http.route
	match *matcher
	// final answers a request the limits let through: the proxy or the
	// fixed answer. res holds the limits' headers, nil without limits.
	final func(ctx *fasthttp.RequestCtx, r *publicRequest, res *httplimit.Result)
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

// New turns a valid, defaulted configuration (as config.Load returns it) into
// a Gateway. It returns an error when a part cannot be built, for example a
// limit the middleware rejects or a store that cannot be configured; it
// never connects to the store or to an upstream.
func New(cfg *config.Config, deps Deps) (*Gateway, error) {
	if cfg == nil {
		return nil, errors.New("gateway: nil config")
	}
	g := &Gateway{cfg: cfg, log: deps.Logger, registry: deps.Registry, maxHeaderBytes: cfg.Server.MaxHeaderBytes,
		clock: deps.Clock, accessLog: deps.AccessLogger,
		latencyKeys: cfg.Shedding != nil && cfg.Shedding.LatencyThreshold > 0}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.accessLog == nil {
		g.accessLog = g.log
	}
	if g.clock == nil {
		g.clock = ratelimit.SystemClock{}
	}
	if g.registry == nil {
		g.registry = metrics.NewRegistry()
	}
	if g.maxHeaderBytes <= 0 {
		g.maxHeaderBytes = defaultMaxHeaderBytes
	}
	m, err := metrics.New(g.registry)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	g.metrics = m
	var prevPanics *panics
	if deps.Previous != nil {
		prevPanics = deps.Previous.panics
	}
	g.panics = newPanics(m, g.log, prevPanics)
	if b := deps.Build; b != (BuildInfo{}) {
		m.BuildInfo(b.Version, b.Commit, b.Go)
	}
	g.reload = deps.Reload
	if err := g.openTracer(deps); err != nil {
		return nil, err
	}
	g.store, err = openStore(cfg, deps, g.metrics, g.log)
	if err != nil {
		return nil, err
	}
	ip := &httplimit.IPResolver{TrustedProxies: cfg.Server.TrustedPrefixes()}
	g.ups = newUpstreams()
	var errs []error
	for i := range cfg.Routes {
		rt, err := g.buildRoute(&cfg.Routes[i], ip, deps.Clock)
		if err != nil {
			errs = append(errs, fmt.Errorf("route %q: %w", cfg.Routes[i].ID, err))
			continue
		}
		g.routes = append(g.routes, rt)
	}
	if len(errs) > 0 {
		g.store.release()
		return nil, fmt.Errorf("gateway: %w", errors.Join(errs...))
	}
	if cfg.RLS != nil {
		if g.rls, err = g.buildRLS(cfg.RLS, deps.Clock); err != nil {
			g.store.release()
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	ids := make([]string, len(g.routes))
	for i, rt := range g.routes {
		ids[i] = rt.id
	}
	for _, d := range g.rlsDomains() {
		ids = append(ids, d.Route)
	}
	g.stats = admin.NewStats(ids)
	if p := deps.Previous; p != nil && p.logins != nil {
		g.logins = p.logins.TakeOver()
	} else {
		g.logins = admin.NewLogins(deps.Clock)
	}
	g.admin = g.adminHandler()
	return g, nil
}

// buildRoute compiles one route: matcher, limits middleware and the final
// handler (proxy or fixed answer), wrapped to count responses.
func (g *Gateway) buildRoute(rc *config.Route, ip *httplimit.IPResolver, clock ratelimit.Clock) (*route, error) {
	var final func(*fasthttp.RequestCtx, *publicRequest, *httplimit.Result)
	var fwd *forwardAuth
	denyStatus := 0
	switch {
	case rc.ForwardAuth != nil:
		final = forwardAllowed
		fwd = newForwardAuth(rc.ForwardAuth, rc.StripPrefix)
		if s := rc.ForwardAuth.DenyStatus; s != http.StatusTooManyRequests {
			denyStatus = s
		}
	case rc.Respond != nil:
		final = respondHandler(rc.Respond)
	default:
		target := rc.UpstreamURL()
		if target == nil {
			return nil, errors.New("upstream URL not parsed (config not validated)")
		}
		ph := newProxyHandler(proxyConfig{
			route: rc.ID, target: target, stripPrefix: rc.StripPrefix,
			preserveHost: rc.PreserveHost, timeout: rc.Timeout, ip: ip,
		}, g.ups, g.metrics, g.log).withLatency(g.cfg.Shedding, g.latencyOf(rc))
		ph.panics = g.panics
		final = ph.serve
	}
	limits, err := g.limits(rc)
	if err != nil {
		return nil, err
	}
	var mw *httplimit.Middleware
	if len(limits) > 0 {
		mw, err = httplimit.New(httplimit.Options{
			Route:        rc.ID,
			Limits:       limits,
			Store:        g.routeStore(rc.ID),
			Leases:       g.leaseStore(),
			Clock:        clock,
			IP:           ip,
			OnStoreError: g.onStoreError(rc.ID),
			Observe:      g.observe,
			Override:     g.override,
		})
		if err != nil {
			return nil, err
		}
		limits = mw.Limits()
	}
	shed, err := g.newRouteShed(rc, ip)
	if err != nil {
		return nil, err
	}
	return &route{
		shed:       shed,
		id:         rc.ID,
		path:       rc.Match.Path,
		match:      newMatcher(rc.Match),
		final:      final,
		mw:         mw,
		limits:     limits,
		fwd:        fwd,
		denyStatus: denyStatus,
	}, nil
}

// limits converts a route's configured limits to the middleware's.
func (g *Gateway) limits(rc *config.Route) ([]httplimit.Limit, error) {
	var out []httplimit.Limit
	var errs []error
	policy := func(name string) *ratelimit.Policy {
		p := g.cfg.Policy(name)
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
func (g *Gateway) observe(r httplimit.Request, ev *httplimit.Event) {
	for i := range ev.Verdicts {
		v := &ev.Verdicts[i]
		g.metrics.Decision(ev.Route, v.Policy.Name(), v.Result)
	}
	g.stats.Record(g.clock, ev)
	if g.latencyKeys {
		if pr, ok := r.(*publicRequest); ok {
			if c := clientOfKeys(ev); c != 0 {
				pr.client = c
			}
		}
	}
	g.observeAccess(r.Context(), ev)
	g.traceDecision(r, ev)
}

// fellBack returns the hook that counts route's decisions made without
// the store (sluice_fallback_decisions_total) and marks them in the access
// log.
func (g *Gateway) fellBack(route string) func(context.Context, fallback.Mode) {
	return func(ctx context.Context, mode fallback.Mode) {
		g.metrics.FallbackDecision(route, string(mode))
		noteFallback(ctx, string(mode))
		g.traceFallback(ctx, string(mode))
	}
}

// override is the middleware's hook for the admin API's per-key overrides.
// A name the current configuration does not define (the policy was removed
// by a reload) is ignored.
func (g *Gateway) override(_ context.Context, route string, key []string) *ratelimit.Policy {
	name := g.store.overrides.Lookup(route, key)
	if name == "" {
		return nil
	}
	return g.cfg.Policy(name)
}

// onStoreError answers a store error the middleware could not decide past.
// The store (store/fallback around any primary) has applied on_error and
// counted it already: an error reaching here is a denial (deny mode, or
// local mode with no store more local) or not a store failure.
func (g *Gateway) onStoreError(routeID string) func(httplimit.Request, error) *httplimit.Problem {
	return func(_ httplimit.Request, err error) *httplimit.Problem {
		if errors.Is(err, fallback.ErrUnavailable) {
			// The store's failure was logged where it was seen (a Redis
			// breaker's opening once, an in-process store's each time); a
			// line for every request would turn an outage's traffic into
			// log volume. The access log still records each 503.
			g.log.Debug("store unavailable, denied", "route", routeID, "error", err)
		} else {
			g.log.Warn("store failed", "route", routeID, "on_error", g.cfg.Store.OnError, "error", err)
		}
		return storeUnavailable
	}
}

// storeUnavailable answers a request whose limits the store could not decide.
var storeUnavailable = &httplimit.Problem{Status: http.StatusServiceUnavailable, Detail: "The rate-limit store is unavailable.", RetryAfter: 1}

// Registry returns the registry the gateway's metrics are on.
func (g *Gateway) Registry() *prometheus.Registry { return g.registry }

// RecordReload counts a config reload in sluice_config_reloads_total: ok
// when a new gateway was swapped in, failed when the old one kept serving;
// it sets sluice_config_last_reload_successful and, on success,
// sluice_config_last_reload_success_timestamp_seconds.
func (g *Gateway) RecordReload(ok bool) { g.metrics.Reload(ok, time.Now()) }

// RecordStart records the configuration the process started with as a
// successful load (sluice_config_last_reload_successful 1, the success
// timestamp now) without counting a reload.
func (g *Gateway) RecordStart() { g.metrics.ConfigLoaded(time.Now()) }

// Config returns the configuration the gateway was built from. It must not be modified.
func (g *Gateway) Config() *config.Config { return g.cfg }

// Ready reports whether the instance should take traffic, within timeout:
// the readiness condition of /readyz. Under on_error allow it always is
// (the instance serves every request while the store is down); otherwise
// the store must answer, or, for a Redis store under on_error local, the
// local fallback decides.
func (g *Gateway) Ready(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return g.ready(ctx)
}

// ready is Ready within ctx.
func (g *Gateway) ready(ctx context.Context) error {
	if !g.store.status.Ready(ctx) {
		return errStoreDown
	}
	return nil
}

// errStoreDown is Ready's answer when the store does not answer and
// on_error has nothing to decide in its place.
var errStoreDown = errors.New("gateway: store unavailable")

// readyPolicy is the policy of /readyz's probe, which reads and never writes.
var readyPolicy = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "readyz", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second})

// Close releases the gateway's store (closing it unless a newer gateway
// shares it). Call it once no request is being served by the gateway;
// Server does so after a reload. Close is idempotent.
func (g *Gateway) Close() error {
	if g.closed.Swap(true) {
		return nil
	}
	g.ups.close()
	g.closeTracer()
	return g.store.release()
}

// errorKind classifies a store error for sluice_store_errors_total
// (timeout, connection, script or other), as the Redis store defines them.
func errorKind(err error) metrics.ErrorKind {
	if k := redis.ErrorKind(err); k != "" {
		return metrics.ErrorKind(k)
	}
	return metrics.KindOther
}
