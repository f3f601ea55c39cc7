package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// HeadersSCG is Limit.Headers' value that adds Spring Cloud Gateway's
// rate-limit headers.
const HeadersSCG = "scg"

// scg checks what policies with compat scg and limits with headers need.
func (v *validator) scg(c *Config, compiled map[string]*ratelimit.Policy) {
	compat := func(name string) ratelimit.Compat {
		if p := compiled[name]; p != nil {
			return p.Compat()
		}
		return ""
	}
	isSCG := func(name string) bool { return compat(name).SCG() }
	if c.Store.Type != StoreRedis {
		for _, name := range c.PolicyNames() {
			if isSCG(name) {
				v.errf(joinPath(mapPath("policies", name), "compat"),
					"compat %s keeps the budget in Spring Cloud Gateway's Redis keys; it needs store.type redis", compat(name))
			}
		}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		for j := range r.Limits {
			l := &r.Limits[j]
			p := fmt.Sprintf("routes[%d].limits[%d]", i, j)
			if l.Headers != "" && l.Headers != HeadersSCG {
				v.errf(p+".headers", "unknown headers %q (allowed: scg)", l.Headers)
			}
			names := []string{l.Policy}
			names = append(names, slices.Sorted(maps.Values(l.Overrides))...)
			if l.Plans != nil {
				names = append(names, slices.Sorted(maps.Values(l.Plans.Policies))...)
			}
			scgName, routed, legacy := "", "", ""
			for _, n := range names {
				if isSCG(n) && scgName == "" {
					scgName = n
				}
				if compat(n) == ratelimit.CompatSCG && routed == "" {
					routed = n
				}
				if compat(n) == ratelimit.CompatSCG41 && legacy == "" {
					legacy = n
				}
			}
			switch {
			case scgName == "" && l.SCGRouteID != "":
				v.errf(p+".scg_route_id", "scg_route_id applies to policies with compat scg; this limit has none")
			case routed != "" && l.SCGRouteID == "":
				v.errf(p, "policy %q has compat scg (Spring Cloud Gateway 4.2.0 and later, whose keys name the route): set scg_route_id to the SCG route's id, or use compat scg-4.1 for SCG up to 4.1.x", routed)
			case legacy != "" && l.SCGRouteID != "":
				v.errf(p+".scg_route_id", "policy %q has compat scg-4.1 (Spring Cloud Gateway up to 4.1.x, whose keys do not name the route): scg_route_id does not apply", legacy)
			}
			if scgName == "" {
				continue
			}
			if len(l.Key) > 1 {
				v.errf(p+".key", "policy %q has compat scg, whose budget is named by one key value as Spring Cloud Gateway's key resolver gives it; use a single-part key", scgName)
			}
			if l.OnEmptyKey == httplimit.EmptyKeyAnonymous {
				v.errf(p+".on_empty_key", "policy %q has compat scg, which has no shared budget for requests without a key (Spring Cloud Gateway denies them or lets them through): use deny or skip", scgName)
			}
			if c.Store.Redis.Mode == RedisCluster && len(r.Limits) > 1 {
				v.errf(p, "policy %q has compat scg, whose keys Spring Cloud Gateway places in their own Redis Cluster hash slot: on a cluster, a route with a compat scg limit can have no other limit", scgName)
			}
		}
	}
}
