package rls

import (
	"context"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// Domain is one domain as the admin API and the dashboard see it: a
// route-like entry whose limits are the descriptor tree's limits.
type Domain struct {
	// Name is the domain; Route is [Route] of it.
	Name, Route string
	// Limits are the domain's limits (unlimited ones and bans, which keep
	// no state, left out) with their
	// state-key IDs. A limit's Key has one part per descriptor entry: const
	// for an entry with a fixed value, a placeholder header part for the
	// others, so that the admin API matches key parts as it does a route's.
	Limits []httplimit.Limit
	// PolicyFor returns the policy limit i applies to key parts now,
	// overrides included.
	PolicyFor func(ctx context.Context, i int, parts []string) *ratelimit.Policy
}

// Domains returns the service's domains in configuration order.
func (s *Service) Domains() []Domain {
	out := make([]Domain, 0, len(s.order))
	for _, d := range s.order {
		var ls []*limit
		dv := Domain{Name: d.name, Route: d.route}
		for _, l := range d.limits {
			if l.policy == nil || l.banned {
				continue
			}
			ls = append(ls, l)
			dv.Limits = append(dv.Limits, httplimit.Limit{ID: l.id, Policy: l.policy, Key: l.key, Shadow: l.shadow})
		}
		route := d.route
		dv.PolicyFor = func(ctx context.Context, i int, parts []string) *ratelimit.Policy {
			if s.o.Override != nil {
				if p := s.o.Override(ctx, route, parts); p != nil {
					return p
				}
			}
			return ls[i].policy
		}
		out = append(out, dv)
	}
	return out
}

// Policies returns the policies the service made from envoyproxy/ratelimit
// rate_limit blocks, so that the admin API can reset their state.
func (s *Service) Policies() []*ratelimit.Policy {
	var out []*ratelimit.Policy
	for _, d := range s.order {
		for _, l := range d.limits {
			if l.generated {
				out = append(out, l.policy)
			}
		}
	}
	return out
}
