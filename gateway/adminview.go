package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sluice-gw/sluice/gateway/admin"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/gateway/rls"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// adminHandler builds the admin listener's handler (package admin) over
// this gateway.
func (g *Gateway) adminHandler() http.Handler {
	o := admin.Options{
		Token:       g.cfg.Admin.Token,
		Logins:      g.logins,
		Stats:       g.stats,
		Metrics:     metrics.Handler(g.registry),
		Policy:      g.policy,
		PolicyNames: g.policyNames(),
		Config:      configSummary(g.cfg, g.rls),
		Logger:      g.log,
		Clock:       g.clock,
		Reload:      g.reload,
	}
	o.Pools = poolsView(g.table, g.cfg)
	if !g.cfg.Server.AccessLog.RawKeys {
		o.ShowKey = core.HashKey
	}
	for _, rt := range g.table.Routes() {
		ar := admin.Route{ID: rt.ID(), Limits: rt.Limits()}
		if mw := rt.Middleware(); mw != nil {
			ar.PolicyFor = mw.PolicyFor
		}
		o.Routes = append(o.Routes, ar)
	}
	for _, d := range rlsDomains(g.rls) {
		o.Routes = append(o.Routes, admin.Route{ID: d.Route, Limits: d.Limits, PolicyFor: d.PolicyFor})
	}
	return admin.New(adminView{g}, o)
}

// adminView is the gateway as package admin asks of it.
type adminView struct{ g *Gateway }

var _ admin.Gateway = adminView{}

func (a adminView) Ready(ctx context.Context) error { return ready(a.g.store, ctx) }

func (a adminView) Store() ratelimit.Store     { return a.g.store }
func (a adminView) Overrides() admin.Overrides { return a.g.store.overrides }

// StoreStatus reports the store's state, probing the store itself (for a
// Redis store behind the fallback: Redis, not the fallback) within a second.
func (a adminView) StoreStatus(ctx context.Context) admin.StoreView {
	sc, st := a.g.cfg.Store, a.g.store.status
	v := admin.StoreView{Type: sc.Type, OnError: string(sc.OnError), FallbackActive: st.Engaged(), Breaker: st.Breaker()}
	if sc.Type == config.StoreRedis {
		v.Mode = string(sc.Redis.Mode)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := st.Probe(ctx); err != nil {
		v.Error = err.Error()
	} else {
		v.Healthy = true
	}
	return v
}

// configSummary is the configuration as the dashboard shows it.
func configSummary(cfg *config.Config, rs *rls.Service) admin.ConfigSummary {
	// Summary starts with "FILE: ok: "; the gateway does not know the file.
	_, summary, _ := strings.Cut(cfg.Summary(""), "ok: ")
	cs := admin.ConfigSummary{Summary: summary, Effective: cfg.Effective()}
	for _, rc := range cfg.Routes {
		r := admin.RouteConfig{ID: rc.ID, Path: rc.Match.Path, Target: config.RedactAddress(rc.Upstream)}
		if rc.Pool != nil {
			r.Target = fmt.Sprintf("pool of %d (%s)", len(rc.Pool.Targets), rc.Pool.Balance)
		}
		if rc.Respond != nil {
			r.Target = "respond " + http.StatusText(rc.Respond.Status)
		}
		for _, l := range rc.Limits {
			lc := admin.LimitConfig{Policy: l.Policy, Key: keyText(l.Key), Shadow: l.Shadow}
			if p := cfg.Policy(l.Policy); p != nil {
				lc.Algorithm = string(p.Algorithm())
			}
			r.Limits = append(r.Limits, lc)
		}
		cs.Routes = append(cs.Routes, r)
	}
	for _, d := range rlsDomains(rs) {
		r := admin.RouteConfig{ID: d.Route, Path: "envoy rate limit service", Target: "domain " + d.Name}
		for _, l := range d.Limits {
			r.Limits = append(r.Limits, admin.LimitConfig{Policy: l.Policy.Name(), Key: keyText(l.Key), Shadow: l.Shadow, Algorithm: string(l.Policy.Algorithm())})
		}
		cs.Routes = append(cs.Routes, r)
	}
	return cs
}

// poolsView returns the dashboard's view of table's pool routes (those
// with a pool section), nil when it has none.
func poolsView(table *core.Table, cfg *config.Config) func() []admin.PoolView {
	type poolRoute struct {
		id   string
		pool *core.Pool
	}
	var pools []poolRoute
	for i, rt := range table.Routes() {
		if up := rt.Upstream(); up != nil && cfg.Routes[i].Pool != nil {
			pools = append(pools, poolRoute{rt.ID(), up.Pool})
		}
	}
	if len(pools) == 0 {
		return nil
	}
	return func() []admin.PoolView {
		out := make([]admin.PoolView, 0, len(pools))
		for _, p := range pools {
			v := admin.PoolView{Route: p.id}
			for _, t := range p.pool.Targets() {
				v.Targets = append(v.Targets, admin.TargetView{Target: t.URL.String(), Up: t.Up(), InFlight: t.InFlight(), Requests: t.Requests()})
			}
			out = append(out, v)
		}
		return out
	}
}

// keyText shows a key as the configuration writes it: the part alone, or a
// flow list such as "[header:X-User-Id, path]".
func keyText(k httplimit.Key) string {
	if len(k) == 1 {
		return k[0].String()
	}
	parts := make([]string, len(k))
	for i, p := range k {
		parts[i] = p.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
