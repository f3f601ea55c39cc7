// Package metrics defines sluice's Prometheus collectors (docs/operations.md,
// "Metrics") and the methods that record gateway events on them.
//
// Every label value comes from a bounded set: route ids and policy names from
// the configuration, status codes, decision results, store error kinds and
// fallback modes. The rate-limit key is never a label.
//
// Collectors are registered on an injected prometheus.Registerer, never the
// global one. Calling New twice on one registry reuses the collectors already
// there, so a gateway rebuilt on reload keeps counting where the old one left off.
package metrics

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluice-gw/sluice/ratelimit"
)

// ErrorKind classifies a store failure, the `kind` label of sluice_store_errors_total.
type ErrorKind string

// Store error kinds (docs/semantics.md §6.5).
const (
	KindTimeout    ErrorKind = "timeout"
	KindConnection ErrorKind = "connection"
	KindScript     ErrorKind = "script"
	KindOther      ErrorKind = "other"
)

// Metrics records gateway events. It is safe for concurrent use. The zero
// value is not usable; a nil *Metrics records nothing, so code paths that run
// without metrics need no checks.
type Metrics struct {
	requests       *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	upstream       *prometheus.HistogramVec
	storeErrors    *prometheus.CounterVec
	storeDuration  prometheus.Histogram
	fallback       *prometheus.CounterVec
	fallbackActive prometheus.Gauge
	localDeny      *prometheus.CounterVec
	reloads        *prometheus.CounterVec
	reloadOK       prometheus.Gauge
	reloadTime     prometheus.Gauge
	buildInfo      *prometheus.GaugeVec
	storeKeys      *storeKeys
	keyOverflow    *prometheus.CounterVec
	rlsUnknown     prometheus.Counter
	shed           *prometheus.CounterVec
	leaseReadds    prometheus.Counter
	renewFailures  prometheus.Counter
	panics         *prometheus.CounterVec
	connsRefused   *prometheus.CounterVec
	routes         sync.Map // route id -> *routeSeries
	// The pools' targets (targets.go).
	targetUp        *targetUp
	targetRequests  *prometheus.CounterVec
	targetEjections *prometheus.CounterVec
}

// New creates sluice's collectors and registers them on reg. When reg already
// holds collectors of the same name and shape (an earlier New on the same
// registry), those are reused. It returns an error when reg is nil or holds an
// incompatible collector under one of sluice's names.
func New(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		return nil, errors.New("metrics: nil registerer")
	}
	m := &Metrics{}
	var errs []error
	m.requests = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_total",
		Help: "Requests answered by the gateway, by route and status code. Route is empty when no route matched.",
	}, []string{"route", "code"}))
	m.decisions = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_decisions_total",
		Help: "Rate-limit decisions, one per limit per request, by route, policy in force and result (allowed, denied, shadow_denied).",
	}, []string{"route", "policy", "result"}))
	m.upstream = register(reg, &errs, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sluice_upstream_duration_seconds",
		Help:    "Time from forwarding a request upstream until the upstream's response headers arrive (or the attempt fails), by route.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route"}))
	m.storeErrors = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_store_errors_total",
		Help: "Failed store calls by kind (timeout, connection, script, other).",
	}, []string{"kind"}))
	m.storeDuration = register(reg, &errs, prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "sluice_store_duration_seconds",
		Help:    "Duration of store calls (one call decides every limit of a request).",
		Buckets: []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1},
	}))
	m.fallback = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_fallback_decisions_total",
		Help: "Requests decided without the store, by route and on_error mode (local, allow, deny).",
	}, []string{"route", "mode"}))
	m.fallbackActive = register(reg, &errs, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_fallback_active",
		Help: "1 while decisions are made without the store: the circuit breaker is open, or a request was decided without it (the local-first denial of a key owing fallback units included) within the last 10s; 0 otherwise.",
	}))
	m.localDeny = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_local_deny_decisions_total",
		Help: "Requests denied by this instance without a store call, because a limit of theirs was denied by the store until a time not yet reached (store.local_deny), by route.",
	}, []string{"route"}))
	m.reloads = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_config_reloads_total",
		Help: "Config reloads (SIGHUP, POST /admin/v1/reload or reload.watch) by result: ok (swapped in) or failed (old config kept).",
	}, []string{"result"}))
	m.reloadOK = register(reg, &errs, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_config_last_reload_successful",
		Help: "1 when the last config load or reload succeeded, 0 when the last reload failed and the previous config kept serving.",
	}))
	m.reloadTime = register(reg, &errs, prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "sluice_config_last_reload_success_timestamp_seconds",
		Help: "Unix time of the last successful config load or reload.",
	}))
	m.buildInfo = register(reg, &errs, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "sluice_build_info",
		Help: "Always 1; the labels name the running build as `sluice version` prints it.",
	}, []string{"version", "commit", "go"}))
	m.storeKeys = register(reg, &errs, newStoreKeys())
	m.keyOverflow = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_store_key_overflow_total",
		Help: "Limits decided against a shared overflow budget because store.memory.max_keys was reached, by in-process store (memory, fallback).",
	}, []string{"store"}))
	m.rlsUnknown = register(reg, &errs, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_rls_unknown_domain_total",
		Help: "Rate limit service calls (ShouldRateLimit) whose domain the configuration does not define, answered OK without a limit. The domain is not a label: clients choose it.",
	}))
	m.shed = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_shed_total",
		Help: "Requests shed (503) by load shedding, by route, route priority and reason (in_flight: the fleet budget share of the priority is full; latency: the upstream is slow).",
	}, []string{"route", "priority", "reason"}))
	m.leaseReadds = register(reg, &errs, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_lease_readds_total",
		Help: "Leases (concurrency limits, the shedding budget) a renewal added back to the store because it had lost them while their requests were still in flight: they expired while renewals failed, or the store lost its data.",
	}))
	m.renewFailures = register(reg, &errs, prometheus.NewCounter(prometheus.CounterOpts{
		Name: "sluice_lease_renew_failures_total",
		Help: "Lease renewals (one store call renewing every lease an interval holds) the store failed.",
	}))
	m.panics = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_panics_total",
		Help: "Panics recovered while serving a request, by door (gateway: the public listener's proxy and fixed answers; forward_auth: forward-auth routes; rls: the rate limit service).",
	}, []string{"door"}))
	m.connsRefused = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_connections_refused_total",
		Help: "Connections to the public listener answered and closed at once because a connection bound was reached (bound: max_conns, 503; max_conns_per_ip, 429).",
	}, []string{"bound"}))
	m.targetUp = register(reg, &errs, newTargetUp())
	m.targetRequests = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_upstream_target_requests_total",
		Help: "Requests sent to a pool target, retries included, by route and target.",
	}, []string{"route", "target"}))
	m.targetEjections = register(reg, &errs, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_upstream_target_ejections_total",
		Help: "Times a pool target was taken out of rotation, by route, target and reason (passive: connection failures in a row; active: failed health-check probes; latency: its latency over shedding.latency_threshold while another target's is within it).",
	}, []string{"route", "target", "reason"}))
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	for _, door := range []string{DoorGateway, DoorForwardAuth, DoorRLS} {
		m.panics.WithLabelValues(door) // present at 0 from the start, so that increase() sees the first
	}
	for _, bound := range []string{BoundMaxConns, BoundMaxConnsPerIP} {
		m.connsRefused.WithLabelValues(bound)
	}
	return m, nil
}

// The doors a request comes in by, the door label of sluice_panics_total.
const (
	DoorGateway     = "gateway"      // the public listener: proxied requests and fixed answers
	DoorForwardAuth = "forward_auth" // the public listener: forward-auth routes
	DoorRLS         = "rls"          // Envoy's rate limit service
)

// register registers c on reg, or returns the collector already registered
// under the same descriptor.
func register[C prometheus.Collector](reg prometheus.Registerer, errs *[]error, c C) C {
	err := reg.Register(c)
	if err == nil {
		return c
	}
	if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	*errs = append(*errs, err)
	return c
}

// NewRegistry returns a fresh registry holding the Go runtime and process
// collectors, ready for New and Handler.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Handler serves the metrics gathered from g in the Prometheus text format.
func Handler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}

// Request counts one answered request on route with status code. Codes
// outside 100..599 are recorded as "other".
func (m *Metrics) Request(route string, code int) {
	if m == nil {
		return
	}
	m.request(route, code).Inc()
}

// Decision counts one limit's verdict on route under the policy in force.
func (m *Metrics) Decision(route, policy string, r ratelimit.Verdict) {
	if m == nil {
		return
	}
	m.decision(route, policy, string(r)).Inc()
}

// Decisions counts each limit's verdict of one evaluation (docs/semantics.md
// §6.5): a limit that admits counts as allowed (even when another denied the
// request), a shadow limit that refuses as shadow_denied, any other refusal
// as denied. reqs and ds are parallel.
func (m *Metrics) Decisions(route string, reqs []ratelimit.Request, ds []ratelimit.Decision) {
	if m == nil {
		return
	}
	for i := range reqs {
		m.Decision(route, reqs[i].Policy.Name(), ratelimit.VerdictOf(reqs[i], ds[i]))
	}
}

// UpstreamDuration records how long route's upstream took.
func (m *Metrics) UpstreamDuration(route string, d time.Duration) {
	if m == nil {
		return
	}
	m.series(route).upstream.Observe(d.Seconds())
}

// StoreError counts one failed store call of the given kind.
func (m *Metrics) StoreError(kind ErrorKind) {
	if m == nil {
		return
	}
	m.storeErrors.WithLabelValues(string(kind)).Inc()
}

// StoreDuration records the duration of one store call.
func (m *Metrics) StoreDuration(d time.Duration) {
	if m == nil {
		return
	}
	m.storeDuration.Observe(d.Seconds())
}

// FallbackDecision counts one request on route decided without the store
// under on_error mode (local, allow or deny).
func (m *Metrics) FallbackDecision(route, mode string) {
	if m == nil {
		return
	}
	m.fallback.WithLabelValues(route, mode).Inc()
}

// LocalDenyDecision counts one request on route denied without a store call
// because a limit of its was known denied (store.local_deny).
func (m *Metrics) LocalDenyDecision(route string) {
	if m == nil {
		return
	}
	m.localDeny.WithLabelValues(route).Inc()
}

// RLSUnknownDomain counts one rate limit service call for a domain the
// configuration does not define.
func (m *Metrics) RLSUnknownDomain() {
	if m == nil {
		return
	}
	m.rlsUnknown.Inc()
}

// LeaseReadds counts n leases a renewal added back to the store.
func (m *Metrics) LeaseReadds(n int) {
	if m == nil || n <= 0 {
		return
	}
	m.leaseReadds.Add(float64(n))
}

// LeaseRenewFailure counts one lease renewal call the store failed.
func (m *Metrics) LeaseRenewFailure() {
	if m == nil {
		return
	}
	m.renewFailures.Inc()
}

// SetFallbackActive sets sluice_fallback_active to 1 (true) or 0.
func (m *Metrics) SetFallbackActive(active bool) {
	if m == nil {
		return
	}
	v := 0.0
	if active {
		v = 1
	}
	m.fallbackActive.Set(v)
}

// Reload counts one config reload: ok when the new config was swapped in,
// failed when it was rejected and the old one kept serving. It sets
// sluice_config_last_reload_successful, and on success
// sluice_config_last_reload_success_timestamp_seconds to at.
func (m *Metrics) Reload(ok bool, at time.Time) {
	if m == nil {
		return
	}
	result := "failed"
	if ok {
		result = "ok"
	}
	m.reloads.WithLabelValues(result).Inc()
	m.configLoaded(ok, at)
}

// ConfigLoaded records the configuration a process started with, loaded at
// at: sluice_config_last_reload_successful is 1 and the success timestamp is
// at, as after a successful reload, without counting a reload.
func (m *Metrics) ConfigLoaded(at time.Time) {
	if m == nil {
		return
	}
	m.configLoaded(true, at)
}

func (m *Metrics) configLoaded(ok bool, at time.Time) {
	if !ok {
		m.reloadOK.Set(0)
		return
	}
	m.reloadOK.Set(1)
	m.reloadTime.Set(float64(at.UnixNano()) / 1e9)
}

// BuildInfo sets sluice_build_info{version, commit, go} to 1.
func (m *Metrics) BuildInfo(version, commit, goVersion string) {
	if m == nil {
		return
	}
	m.buildInfo.WithLabelValues(version, commit, goVersion).Set(1)
}

// Shed counts one request of route (of the given priority) shed for reason.
func (m *Metrics) Shed(route, priority, reason string) {
	if m == nil {
		return
	}
	m.shed.WithLabelValues(route, priority, reason).Inc()
}

// The connection bounds, the bound label of sluice_connections_refused_total.
const (
	BoundMaxConns      = "max_conns"        // server.max_conns
	BoundMaxConnsPerIP = "max_conns_per_ip" // server.max_conns_per_ip
)

// ConnRefused counts one connection refused at bound (BoundMaxConns or
// BoundMaxConnsPerIP).
func (m *Metrics) ConnRefused(bound string) {
	if m == nil {
		return
	}
	m.connsRefused.WithLabelValues(bound).Inc()
}

// Panic counts one panic recovered while serving a request that came in by
// door (DoorGateway, DoorForwardAuth or DoorRLS).
func (m *Metrics) Panic(door string) {
	if m == nil {
		return
	}
	m.panics.WithLabelValues(door).Inc()
}
