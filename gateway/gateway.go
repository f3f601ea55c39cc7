package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-gw/sluice/gateway/admin"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/fastengine"
	"github.com/sluice-gw/sluice/gateway/httpengine"
	"github.com/sluice-gw/sluice/gateway/internal/tracing"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/gateway/rls"
	"github.com/sluice-gw/sluice/ratelimit"
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
// limits and upstreams (core.Table), the engine that serves them
// (fastengine.Handler), the admin endpoints and the store. Building it dials
// nothing. It is safe for concurrent use; Close releases the store once no
// request uses it.
type Gateway struct {
	cfg      *config.Config
	log      *slog.Logger
	registry *prometheus.Registry
	metrics  *metrics.Metrics
	store    *sharedStore
	// table decides the public listener's requests; engine serves them.
	table  *core.Table
	engine *fastengine.Handler
	// web serves them on net/http: HTTPS and h2c.
	web *httpengine.Handler
	// rls is Envoy's rate limit service over the same store, nil without
	// an rls section.
	rls    *rls.Service
	admin  http.Handler
	clock  ratelimit.Clock
	stats  *admin.Stats
	logins *admin.Logins
	reload func(context.Context) (ReloadResult, error)
	// tracer traces public requests; nil when tracing is off. ownTracer:
	// built from the configuration, so Close shuts it down.
	tracer    *tracing.Tracer
	ownTracer bool
	// inflight counts requests being served by this gateway; see Server.
	inflight atomic.Int64
	closed   atomic.Bool
	// panics records the panics recovered while serving requests.
	panics *core.Panics
	// health probes the targets of the pools with a health_check, from
	// when a Server serves the gateway until Close.
	health *healthChecks
}

// New turns a valid, defaulted configuration (as config.Load returns it) into
// a Gateway. It returns an error when a part cannot be built, for example a
// limit the middleware rejects or a store that cannot be configured; it
// never connects to the store or to an upstream. The health checks of its
// pools (pool.health_check) start when a Server starts with it or swaps it
// in, and stop on Close.
func New(cfg *config.Config, deps Deps) (*Gateway, error) {
	if cfg == nil {
		return nil, errors.New("gateway: nil config")
	}
	g := &Gateway{cfg: cfg, log: deps.Logger, registry: deps.Registry, clock: deps.Clock, reload: deps.Reload}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.clock == nil {
		g.clock = ratelimit.SystemClock{}
	}
	if g.registry == nil {
		g.registry = metrics.NewRegistry()
	}
	m, err := metrics.New(g.registry)
	if err != nil {
		return nil, fmt.Errorf("gateway: metrics: %w", err)
	}
	g.metrics = m
	var prevPanics *core.Panics
	if deps.Previous != nil {
		prevPanics = deps.Previous.panics
	}
	g.panics = core.NewPanics(m, g.log, prevPanics)
	if b := deps.Build; b != (BuildInfo{}) {
		m.BuildInfo(b.Version, b.Commit, b.Go)
	}
	if g.tracer, g.ownTracer, err = openTracer(cfg, deps); err != nil {
		return nil, err
	}
	g.store, err = openStore(cfg, deps, g.metrics, g.log)
	if err != nil {
		return nil, err
	}
	if cfg.RLS != nil {
		if g.rls, err = g.buildRLS(cfg.RLS, deps.Clock); err != nil {
			g.store.release()
			return nil, fmt.Errorf("gateway: %w", err)
		}
	}
	ids := make([]string, 0, len(cfg.Routes))
	for _, rc := range cfg.Routes {
		ids = append(ids, rc.ID)
	}
	for _, d := range rlsDomains(g.rls) {
		ids = append(ids, d.Route)
	}
	g.stats = admin.NewStats(ids)
	g.table, err = core.New(cfg, core.Options{
		Store:     func(route string) ratelimit.Store { return g.store.routeStore(route, cfg.Store.Type, g.metrics) },
		Leases:    g.store.leaseStore(g.metrics),
		Clock:     deps.Clock,
		Metrics:   g.metrics,
		Stats:     g.stats,
		Override:  g.override,
		Log:       g.log,
		AccessLog: deps.AccessLogger,
		Tracer:    g.tracer,
	})
	if err != nil {
		g.store.release()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	g.engine = fastengine.NewHandler(g.table, cfg, fastengine.HandlerOptions{Metrics: g.metrics, Log: g.log, Panics: g.panics})
	g.web = httpengine.NewHandler(g.table, cfg, httpengine.HandlerOptions{Metrics: g.metrics, Log: g.log, Panics: g.panics})
	if p := deps.Previous; p != nil && p.logins != nil {
		g.logins = p.logins.TakeOver()
	} else {
		g.logins = admin.NewLogins(deps.Clock)
	}
	g.admin = g.adminHandler()
	g.health = newHealthChecks(g.table, cfg, g.log)
	return g, nil
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

// fellBack returns the hook that counts route's decisions made without
// the store (sluice_fallback_decisions_total) and marks them in the access
// log and the request's span.
func fellBack(m *metrics.Metrics, storeType, route string) func(context.Context, fallback.Mode) {
	return func(ctx context.Context, mode fallback.Mode) {
		m.FallbackDecision(route, string(mode))
		core.FellBack(ctx, storeType, mode)
	}
}

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
	return ready(g.store, ctx)
}

// ready is Ready within ctx.
func ready(s *sharedStore, ctx context.Context) error {
	if !s.status.Ready(ctx) {
		return errStoreDown
	}
	return nil
}

// errStoreDown is Ready's answer when the store does not answer and
// on_error has nothing to decide in its place.
var errStoreDown = errors.New("gateway: store unavailable")

// readyPolicy is the policy of /readyz's probe, which reads and never writes.
var readyPolicy = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "readyz", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second})

// Close stops the health checks of its pools and releases the gateway's
// store (closing it unless a newer gateway shares it). Call it once no request is being served by the gateway;
// Server does so after a reload. Close is idempotent.
func (g *Gateway) Close() error {
	if g.closed.Swap(true) {
		return nil
	}
	g.health.stop()
	g.engine.Close()
	g.web.Close()
	closeTracer(g.tracer, g.ownTracer, g.log)
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
