package httplimit

import (
	"net/http"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Evaluation is one limit's part in a decision as the rate-limit headers
// see it. An engine that asks the store itself (sluice's Envoy rate limit
// service) passes its evaluations to [Result.SetDecision] and so answers
// with the headers the middleware sends.
type Evaluation struct {
	// Policy is the policy in force. Required.
	Policy *ratelimit.Policy
	// Decision is the store's decision for this limit.
	Decision ratelimit.Decision
	// Cost is the units asked; zero means 1.
	Cost int64
	// Shadow marks a shadow limit, which appears in no header.
	Shadow bool
}

// maxStackEvaluations is how many evaluations SetDecision converts without
// allocating.
const maxStackEvaluations = 8

// SetDecision resets res and fills it in as [Middleware.Decide] does once
// the store has decided evals (in limit order) at now, the time the
// decision's Reset counts from: the rate-limit headers and, when admitted
// is false, Status 429 and RetryAfter, the longest RetryAfter of a denying
// limit in whole seconds, at least 1. Body stays nil.
func (res *Result) SetDecision(now time.Time, evals []Evaluation, admitted bool) {
	res.reset()
	var buf [maxStackEvaluations]outcome
	out := buf[:0]
	var retry time.Duration
	for i := range evals {
		e := &evals[i]
		out = append(out, outcome{policy: e.Policy, d: e.Decision, cost: max(1, e.Cost), shadow: e.Shadow})
		if !e.Decision.Allowed && !e.Shadow {
			retry = max(retry, e.Decision.RetryAfter)
		}
	}
	res.setRateLimitHeaders(now, out, admitted, nil)
	if admitted {
		res.Forward = true
		return
	}
	res.Status, res.RetryAfter = http.StatusTooManyRequests, retryAfterSeconds(retry)
}
