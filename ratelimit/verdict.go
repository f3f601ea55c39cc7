package ratelimit

// Verdict is one limit's own verdict on one request: what a Store's Decision
// for a [Request] means once Shadow is taken into account. Its values are
// the `result` label of sluice_decisions_total and the verdicts the HTTP
// middleware reports.
type Verdict string

// The verdicts of a limit.
const (
	// Allowed: the limit would admit the request, even if another limit
	// denied it.
	Allowed Verdict = "allowed"
	// Denied: a limit that is not a shadow refused the request.
	Denied Verdict = "denied"
	// ShadowDenied: a shadow limit would have refused the request; the
	// request is not denied for it.
	ShadowDenied Verdict = "shadow_denied"
)

// VerdictOf classifies d, the decision for req: Allowed when d admits,
// ShadowDenied when it refuses a shadow request, Denied otherwise.
func VerdictOf(req Request, d Decision) Verdict {
	switch {
	case d.Allowed:
		return Allowed
	case req.Shadow:
		return ShadowDenied
	default:
		return Denied
	}
}
