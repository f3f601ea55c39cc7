package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/gateway/rls"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// buildRLS builds the rate limit service of the rls section: its domains
// decide on the gateway's store through routeStore, so store.on_error,
// local_deny and their metrics apply with the domain's route-like name
// (rls.Route) as the route, its decisions are observed as a route's, and
// calls for a domain it does not define are counted.
func (g *Gateway) buildRLS(c *config.RLS, clock ratelimit.Clock) (*rls.Service, error) {
	return rls.New(c, rls.Options{
		Store: func(route string) ratelimit.Store {
			return g.store.routeStore(route, g.cfg.Store.Type, g.metrics)
		},
		Policy:   g.cfg.Policy,
		Clock:    clock,
		Override: g.override,
		// A rate limit service decision counts as a route's:
		// sluice_decisions_total per limit, and the dashboard's
		// statistics.
		Observe: func(_ context.Context, ev *httplimit.Event) {
			for i := range ev.Verdicts {
				v := &ev.Verdicts[i]
				g.metrics.Decision(ev.Route, v.Policy.Name(), v.Result)
			}
			g.stats.Record(g.clock, ev)
		},
		Logger: g.log,
		UnknownDomain: func(context.Context, string) {
			g.metrics.RLSUnknownDomain()
		},
	})
}

// rlsDomains returns the rate limit service's domains, none without it.
func rlsDomains(s *rls.Service) []rls.Domain {
	if s == nil {
		return nil
	}
	return s.Domains()
}

// policy returns the policy called name: the configuration's, or one the
// rate limit service made from an envoyproxy/ratelimit rate_limit block.
func (g *Gateway) policy(name string) *ratelimit.Policy {
	if p := g.cfg.Policy(name); p != nil {
		return p
	}
	if g.rls != nil {
		for _, p := range g.rls.Policies() {
			if p.Name() == name {
				return p
			}
		}
	}
	return nil
}

// policyNames lists the configuration's policies, then the rate limit
// service's own.
func (g *Gateway) policyNames() []string {
	names := g.cfg.PolicyNames()
	if g.rls != nil {
		for _, p := range g.rls.Policies() {
			names = append(names, p.Name())
		}
	}
	return names
}

// startRLS binds the rate limit service's listener and serves it in the
// background, each call decided by the gateway then current.
func (s *Server) startRLS(c *config.RLS) error {
	srv, err := rls.NewServer(rls.ServerOptions{
		MaxMessageBytes: c.MaxMessageBytes,
		Current: func() (*rls.Service, func()) {
			g := s.acquire()
			return g.rls, func() { g.inflight.Add(-1) }
		},
		Recovered: func(v any) { s.cur.Load().panics.Record(metrics.DoorRLS, v) },
	})
	if err != nil {
		return err
	}
	if s.rlsLn, err = net.Listen("tcp", c.Listen); err != nil {
		return fmt.Errorf("gateway: rls listen %s: %w", c.Listen, err)
	}
	s.rls = srv
	go func() {
		if err := srv.Serve(s.rlsLn); err != nil && !errors.Is(err, net.ErrClosed) {
			s.errc <- err
		}
	}()
	return nil
}

// RLSAddr returns the rate limit service's address (after Start), or nil
// when the configuration has no rls section.
func (s *Server) RLSAddr() net.Addr {
	if s.rlsLn == nil {
		return nil
	}
	return s.rlsLn.Addr()
}

// shutdownRLS drains the rate limit service's calls until ctx is done.
func (s *Server) shutdownRLS(ctx context.Context) error {
	if s.rls == nil {
		return nil
	}
	return s.rls.Shutdown(ctx)
}
