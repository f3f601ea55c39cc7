package ratelimit

import (
	"fmt"
	"math"
)

// Compat names another product whose stored state and arithmetic a policy
// follows instead of sluice's own, so that both decide from one budget.
type Compat string

// CompatSCG makes a token_bucket policy follow the RedisRateLimiter of
// Spring Cloud Gateway 4.2.0 and later, whose keys name the route:
// request_rate_limiter.{<route id>.<id>}.tokens and .timestamp
// ([SCGRouteKey]). Time is in whole seconds of Redis TIME, the refill is
// Rate tokens per elapsed whole second, and keys expire
// floor(2·Capacity/Rate) seconds (at least 1) after each write
// (docs/migrating-from-scg.md).
const CompatSCG Compat = "scg"

// CompatSCG41 is [CompatSCG] for Spring Cloud Gateway up to 4.1.x, whose
// keys do not name the route: request_rate_limiter.{<id>}.tokens and
// .timestamp ([SCGKey]). The arithmetic is the same.
const CompatSCG41 Compat = "scg-4.1"

// SCG reports whether c follows Spring Cloud Gateway's RedisRateLimiter,
// in either key layout.
func (c Compat) SCG() bool { return c == CompatSCG || c == CompatSCG41 }

// compatErrors returns what is wrong with c's Compat.
func compatErrors(c PolicyConfig) []error {
	switch c.Compat {
	case "":
		return nil
	case CompatSCG, CompatSCG41:
	default:
		return []error{&PolicyError{Field: "compat", Value: c.Compat, Reason: ReasonUnknown,
			Detail: fmt.Sprintf("unknown compat %q (scg for Spring Cloud Gateway 4.2.0 and later, scg-4.1 up to 4.1.x)", c.Compat)}}
	}
	var errs []error
	if c.Algorithm != TokenBucket {
		errs = append(errs, &PolicyError{Field: "compat", Value: c.Compat, Reason: ReasonNotApplicable, Takes: []string{string(TokenBucket)},
			Detail: fmt.Sprintf("compat %s applies only to token_bucket, not %s", c.Compat, c.Algorithm)})
	}
	if c.Rate > 0 && c.Rate <= MaxRate && c.Rate != math.Trunc(c.Rate) {
		errs = append(errs, &PolicyError{Field: "rate", Value: c.Rate, Reason: ReasonNotWhole,
			Detail: fmt.Sprintf("compat %s needs a whole number of tokens per second (Spring Cloud Gateway's replenishRate), got %v", c.Compat, c.Rate)})
	}
	return errs
}

// Compat returns the product whose state and arithmetic the policy follows;
// empty for sluice's own.
func (p *Policy) Compat() Compat { return p.cfg.Compat }

// SCGRate returns the whole tokens a compat scg policy adds per second.
func (p *Policy) SCGRate() int64 { return int64(p.cfg.Rate) }

// SCGKey returns the Request.Key of the budget of key resolver value id
// under a [CompatSCG41] policy: "request_rate_limiter.{<id>}", the part
// that the two keys of Spring Cloud Gateway up to 4.1.x share. A store
// appends ".tokens" and ".timestamp" and adds no prefix of its own. The key
// does not name the route, the limit or the policy: as in those SCG
// versions, every such limit that resolves the same id draws on one budget.
func SCGKey(id string) string { return "request_rate_limiter.{" + id + "}" }

// SCGRouteKey returns the Request.Key of the budget of key resolver value
// id on Spring Cloud Gateway route routeID under a [CompatSCG] policy:
// "request_rate_limiter.{<routeID>.<id>}", the part that the two keys of
// Spring Cloud Gateway 4.2.0 and later share. As in SCG, each route has its
// own budget per id, and limits naming the same route and id share one.
func SCGRouteKey(routeID, id string) string {
	return "request_rate_limiter.{" + routeID + "." + id + "}"
}
