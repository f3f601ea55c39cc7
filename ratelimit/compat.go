package ratelimit

import (
	"fmt"
	"math"
)

// Compat names another product whose stored state and arithmetic a policy
// follows instead of sluice's own, so that both decide from one budget.
type Compat string

// CompatSCG makes a token_bucket policy follow Spring Cloud Gateway's
// RedisRateLimiter: its Redis keys request_rate_limiter.{<id>}.tokens and
// .timestamp, time in whole seconds of Redis TIME, a refill of Rate tokens
// per elapsed whole second, and keys that expire floor(2·Capacity/Rate)
// seconds (at least 1) after each write (docs/migrating-from-scg.md).
const CompatSCG Compat = "scg"

// compatErrors returns what is wrong with c's Compat.
func compatErrors(c PolicyConfig) []error {
	switch c.Compat {
	case "":
		return nil
	case CompatSCG:
	default:
		return []error{&PolicyError{Field: "compat", Value: c.Compat, Reason: ReasonUnknown,
			Detail: fmt.Sprintf("unknown compat %q (only scg)", c.Compat)}}
	}
	var errs []error
	if c.Algorithm != TokenBucket {
		errs = append(errs, &PolicyError{Field: "compat", Value: c.Compat, Reason: ReasonNotApplicable, Takes: []string{string(TokenBucket)},
			Detail: fmt.Sprintf("compat scg applies only to token_bucket, not %s", c.Algorithm)})
	}
	if c.Rate > 0 && c.Rate <= MaxRate && c.Rate != math.Trunc(c.Rate) {
		errs = append(errs, &PolicyError{Field: "rate", Value: c.Rate, Reason: ReasonNotWhole,
			Detail: fmt.Sprintf("compat scg needs a whole number of tokens per second (Spring Cloud Gateway's replenishRate), got %v", c.Rate)})
	}
	return errs
}

// Compat returns the product whose state and arithmetic the policy follows;
// empty for sluice's own.
func (p *Policy) Compat() Compat { return p.cfg.Compat }

// SCGRate returns the whole tokens a compat scg policy adds per second.
func (p *Policy) SCGRate() int64 { return int64(p.cfg.Rate) }

// SCGKey returns the Request.Key of the budget of key resolver value id
// under a compat scg policy: "request_rate_limiter.{<id>}", the part that
// Spring Cloud Gateway's two keys share. A store appends ".tokens" and
// ".timestamp" and adds no prefix of its own. The key does not name the
// route, the limit or the policy: as in SCG, every compat scg limit that
// resolves the same id draws on one budget.
func SCGKey(id string) string { return "request_rate_limiter.{" + id + "}" }
