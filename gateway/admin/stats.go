package admin

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// Dashboard statistics: request counters per route and the most limited
// keys. The dashboard polls them every second and draws rates from the
// differences; Prometheus has the same counts in sluice_decisions_total.
const (
	topCapacity = 64          // keys tracked per minute
	topSpan     = time.Minute // one space-saving summary
	topSpans    = 5           // the top keys cover the last 5 minutes
	topShown    = 10
)

// routeCounters counts one route's rate-limited requests.
type routeCounters struct {
	admitted     atomic.Uint64 // the limits admitted the request
	denied       atomic.Uint64 // 429
	shadowDenied atomic.Uint64 // admitted, but a shadow limit would have denied it
	shed         atomic.Uint64 // 503 from load shedding, before the limits
}

// Stats is a gateway's dashboard statistics: request counters per route
// and the most limited keys. It is safe for concurrent use.
type Stats struct {
	routes map[string]*routeCounters // fixed at build
	top    *topKeys
}

// NewStats returns empty statistics for the routes with the given ids.
func NewStats(routeIDs []string) *Stats {
	s := &Stats{routes: make(map[string]*routeCounters, len(routeIDs)), top: newTopKeys(topCapacity, topSpan, topSpans)}
	for _, id := range routeIDs {
		s.routes[id] = &routeCounters{}
	}
	return s
}

// Record counts one middleware event; clock gives the time of a denial for
// the top keys, and is read only when the event holds one.
func (s *Stats) Record(clock ratelimit.Clock, ev *httplimit.Event) {
	c := s.routes[ev.Route]
	if c == nil {
		return
	}
	switch ev.Outcome {
	case httplimit.OutcomeAdmitted:
		c.admitted.Add(1)
	case httplimit.OutcomeLimited:
		c.denied.Add(1)
	}
	shadow := false
	var now time.Time
	for i := range ev.Verdicts {
		v := &ev.Verdicts[i]
		switch {
		case v.Result == ratelimit.ShadowDenied:
			shadow = true
		case v.Result == ratelimit.Denied && !v.Anonymous:
			if now.IsZero() {
				now = clock.Now()
			}
			s.top.add(now, ev.Route, v.Key)
		}
	}
	if shadow && ev.Outcome == httplimit.OutcomeAdmitted {
		c.shadowDenied.Add(1)
	}
}

// RecordShed counts one request of route shed by load shedding.
func (s *Stats) RecordShed(route string) {
	if s == nil {
		return
	}
	if c := s.routes[route]; c != nil {
		c.shed.Add(1)
	}
}

// StatsView is the answer of GET /admin/v1/stats.
type StatsView struct {
	// Time is the server's time in Unix milliseconds.
	Time    int64       `json:"time"`
	Routes  []RouteView `json:"routes"`
	TopKeys []TopKey    `json:"top_keys"`
	// KeysHashed reports that the keys of TopKeys and Overrides are shown
	// as the access log shows them, hashed (Options.ShowKey), because
	// server.access_log.raw_keys is off: the dashboard may be on a shared
	// screen.
	KeysHashed bool          `json:"keys_hashed"`
	TopWindow  int           `json:"top_window_seconds"`
	Store      StoreView     `json:"store"`
	Overrides  []Override    `json:"overrides"`
	Config     ConfigSummary `json:"config"`
	// Pools are the routes with a pool section and their targets now.
	Pools []PoolView `json:"pools"`
}

// PoolView is one pool route's targets as the dashboard shows them.
type PoolView struct {
	Route   string       `json:"route"`
	Targets []TargetView `json:"targets"`
}

// TargetView is one pool target now.
type TargetView struct {
	// Target is the target's URL.
	Target string `json:"target"`
	// Up: in rotation.
	Up bool `json:"up"`
	// InFlight is the requests on it now; Requests those sent to it since
	// the configuration was loaded, retries included.
	InFlight int64  `json:"in_flight"`
	Requests uint64 `json:"requests"`
}

// RouteView is one route's counters.
type RouteView struct {
	Route        string `json:"route"`
	Admitted     uint64 `json:"admitted"`
	Denied       uint64 `json:"denied"`
	ShadowDenied uint64 `json:"shadow_denied"`
	// Shed counts the requests load shedding answered 503 (sluice_shed_total).
	Shed uint64 `json:"shed"`
}

// StoreView is the store's state, as the gateway reports it.
type StoreView struct {
	Type string `json:"type"`
	Mode string `json:"mode,omitempty"` // redis: standalone | sentinel | cluster
	// Healthy reports whether the store answered a read within a second.
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
	// OnError is store.on_error. FallbackActive is sluice_fallback_active
	// (decisions are being made without Redis, see docs/operations.md);
	// Breaker is a Redis store's circuit breaker ("closed", or "open" while
	// every request is decided without Redis). Memory stores have neither.
	OnError        string `json:"on_error"`
	FallbackActive bool   `json:"fallback_active"`
	Breaker        string `json:"breaker"`
}

// ConfigSummary is the configuration as the dashboard shows it.
type ConfigSummary struct {
	Summary   string        `json:"summary"`
	Routes    []RouteConfig `json:"routes"`
	Effective string        `json:"effective"`
}

// RouteConfig is one route of a ConfigSummary.
type RouteConfig struct {
	ID     string        `json:"id"`
	Path   string        `json:"path"`
	Target string        `json:"target"`
	Limits []LimitConfig `json:"limits"`
}

// LimitConfig is one limit of a RouteConfig.
type LimitConfig struct {
	Policy    string `json:"policy"`
	Algorithm string `json:"algorithm"`
	Key       string `json:"key"`
	Shadow    bool   `json:"shadow,omitempty"`
}

// statsView gathers the dashboard's data.
func (h *handler) statsView(r *http.Request) StatsView {
	now := h.o.Clock.Now()
	v := StatsView{
		Time:      now.UnixMilli(),
		TopKeys:   h.o.Stats.top.top(now, topShown),
		TopWindow: int(topSpan/time.Second) * topSpans,
		Overrides: h.g.Overrides().List(),
		Config:    h.o.Config,
	}
	if h.o.ShowKey != nil {
		v.KeysHashed = true
		for i := range v.TopKeys {
			v.TopKeys[i].Key = []string{h.o.ShowKey(v.TopKeys[i].Key)}
		}
		for i := range v.Overrides {
			v.Overrides[i].Key = []string{h.o.ShowKey(v.Overrides[i].Key)}
		}
	}
	for _, rt := range h.o.Routes {
		c := h.o.Stats.routes[rt.ID]
		v.Routes = append(v.Routes, RouteView{Route: rt.ID, Admitted: c.admitted.Load(), Denied: c.denied.Load(), ShadowDenied: c.shadowDenied.Load(), Shed: c.shed.Load()})
	}
	v.Store = h.g.StoreStatus(r.Context())
	if h.o.Pools != nil {
		v.Pools = h.o.Pools()
	}
	return v
}
