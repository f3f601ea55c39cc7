package gateway

import (
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/httplimit"
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
}

// stats is a gateway's dashboard statistics. It is safe for concurrent use.
type stats struct {
	routes map[string]*routeCounters // fixed at build
	top    *topKeys
}

func newStats(routeIDs []string) *stats {
	s := &stats{routes: make(map[string]*routeCounters, len(routeIDs)), top: newTopKeys(topCapacity, topSpan, topSpans)}
	for _, id := range routeIDs {
		s.routes[id] = &routeCounters{}
	}
	return s
}

// record counts one middleware event at now.
func (s *stats) record(now time.Time, ev *httplimit.Event) {
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
	for i := range ev.Verdicts {
		v := &ev.Verdicts[i]
		switch {
		case v.Result == httplimit.ResultShadowDenied:
			shadow = true
		case v.Result == httplimit.ResultDenied && !v.Anonymous:
			s.top.add(now, ev.Route, v.Key)
		}
	}
	if shadow && ev.Outcome == httplimit.OutcomeAdmitted {
		c.shadowDenied.Add(1)
	}
}

// statsView is the answer of GET /admin/v1/stats.
type statsView struct {
	// Time is the server's time in Unix milliseconds.
	Time    int64       `json:"time"`
	Routes  []routeView `json:"routes"`
	TopKeys []topKey    `json:"top_keys"`
	// KeysHashed reports that the keys of TopKeys and Overrides are shown
	// as the access log shows them, hashed (see hashKey), because
	// server.access_log.raw_keys is off: the dashboard may be on a shared
	// screen.
	KeysHashed bool          `json:"keys_hashed"`
	TopWindow  int           `json:"top_window_seconds"`
	Store      storeView     `json:"store"`
	Overrides  []override    `json:"overrides"`
	Config     configSummary `json:"config"`
}

type routeView struct {
	Route        string `json:"route"`
	Admitted     uint64 `json:"admitted"`
	Denied       uint64 `json:"denied"`
	ShadowDenied uint64 `json:"shadow_denied"`
}

type storeView struct {
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

type configSummary struct {
	Summary   string        `json:"summary"`
	Routes    []routeConfig `json:"routes"`
	Effective string        `json:"effective"`
}

type routeConfig struct {
	ID     string        `json:"id"`
	Path   string        `json:"path"`
	Target string        `json:"target"`
	Limits []limitConfig `json:"limits"`
}

type limitConfig struct {
	Policy    string `json:"policy"`
	Algorithm string `json:"algorithm"`
	Key       string `json:"key"`
	Shadow    bool   `json:"shadow,omitempty"`
}

// statsView gathers the dashboard's data.
func (g *Gateway) statsView(r *http.Request) statsView {
	now := g.clock.Now()
	v := statsView{
		Time:      now.UnixMilli(),
		TopKeys:   g.stats.top.top(now, topShown),
		TopWindow: int(topSpan/time.Second) * topSpans,
		Overrides: g.store.overrides.list(),
		Config:    g.configSummary(),
	}
	if !g.cfg.Server.AccessLog.RawKeys {
		v.KeysHashed = true
		for i := range v.TopKeys {
			v.TopKeys[i].Key = []string{hashKey(v.TopKeys[i].Key)}
		}
		for i := range v.Overrides {
			v.Overrides[i].Key = []string{hashKey(v.Overrides[i].Key)}
		}
	}
	for _, rt := range g.routes {
		c := g.stats.routes[rt.id]
		v.Routes = append(v.Routes, routeView{Route: rt.id, Admitted: c.admitted.Load(), Denied: c.denied.Load(), ShadowDenied: c.shadowDenied.Load()})
	}
	sc := g.cfg.Store
	v.Store = storeView{Type: sc.Type, OnError: sc.OnError}
	if sc.Type == "redis" {
		v.Store.Mode = sc.Redis.Mode
	}
	if err := g.probeStore(r); err != nil {
		v.Store.Error = err.Error()
	} else {
		v.Store.Healthy = true
	}
	v.Store.FallbackActive = g.store.status.Engaged()
	v.Store.Breaker = g.store.status.Breaker()
	return v
}

func (g *Gateway) configSummary() configSummary {
	// Summary starts with "FILE: ok: "; the gateway does not know the file.
	_, summary, _ := strings.Cut(g.cfg.Summary(""), "ok: ")
	cs := configSummary{Summary: summary, Effective: g.cfg.Effective()}
	for _, rc := range g.cfg.Routes {
		r := routeConfig{ID: rc.ID, Path: rc.Match.Path, Target: config.RedactAddress(rc.Upstream)}
		if rc.Respond != nil {
			r.Target = "respond " + http.StatusText(rc.Respond.Status)
		}
		for _, l := range rc.Limits {
			lc := limitConfig{Policy: l.Policy, Key: l.Key.String(), Shadow: l.Shadow}
			if p := g.cfg.Policy(l.Policy); p != nil {
				lc.Algorithm = string(p.Algorithm())
			}
			r.Limits = append(r.Limits, lc)
		}
		cs.Routes = append(cs.Routes, r)
	}
	return cs
}
