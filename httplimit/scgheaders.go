package httplimit

import (
	"net/http"
	"strconv"

	"github.com/sluice-gw/sluice/ratelimit"
)

// The headers Spring Cloud Gateway's RedisRateLimiter sends, in canonical
// form, for limits with SCGHeaders (docs/migrating-from-scg.md).
// X-RateLimit-Remaining is the name sluice's own trio uses too: where both
// apply, SCG's value is the one sent.
const (
	headerSCGRemaining       = HeaderRemaining
	headerSCGReplenishRate   = "X-Ratelimit-Replenish-Rate"
	headerSCGBurstCapacity   = "X-Ratelimit-Burst-Capacity"
	headerSCGRequestedTokens = "X-Ratelimit-Requested-Tokens"
)

// SCGHeaderNames are the names of the headers [Result.SCGHeader] returns,
// in its order.
var SCGHeaderNames = [4]string{headerSCGRemaining, headerSCGReplenishRate, headerSCGBurstCapacity, headerSCGRequestedTokens}

// scgHeaders holds the four SCG header values, back to back.
type scgHeaders struct {
	buf []byte
	end [4]int // end[3] == 0: none
}

// set writes the values for policy p, a cost of cost and remaining tokens;
// remaining -1 says that no store decided (SCG's answer when it fails open).
func (h *scgHeaders) set(p *ratelimit.Policy, cost, remaining int64) {
	b := h.buf[:0]
	b = strconv.AppendInt(b, remaining, 10)
	h.end[0] = len(b)
	b = strconv.AppendFloat(b, p.Config().Rate, 'f', -1, 64)
	h.end[1] = len(b)
	b = strconv.AppendInt(b, p.Max(), 10)
	h.end[2] = len(b)
	b = strconv.AppendInt(b, max(1, cost), 10)
	h.end[3] = len(b)
	h.buf = b
}

// HasSCGHeaders reports whether the response gets Spring Cloud Gateway's
// headers: some limit of the route has SCGHeaders and was evaluated, or
// would have been when the store failed and the request went through.
func (r *Result) HasSCGHeaders() bool { return r.scg.end[3] > 0 }

// SCGHeader returns the value of the header SCGHeaderNames[i]. The bytes
// belong to r and change when r is reused.
func (r *Result) SCGHeader(i int) []byte {
	start := 0
	if i > 0 {
		start = r.scg.end[i-1]
	}
	return r.scg.buf[start:r.scg.end[i]]
}

// setSCGHeaders fills in SCG's headers from the first limit with
// SCGHeaders among the evaluated requests (nil decisions: the store failed
// and the request goes through unlimited).
func (m *Middleware) setSCGHeaders(sc *scratch, res *Result, decided bool) {
	for j := range sc.dec.Requests {
		l, q := &m.limits[sc.limitOf[j]], &sc.dec.Requests[j]
		if !l.SCGHeaders {
			continue
		}
		remaining := int64(-1)
		if decided && !sc.out[j].Uncounted {
			remaining = max(0, sc.out[j].Remaining)
		}
		res.scg.set(q.Policy, q.Cost, remaining)
		return
	}
}

// writeSCGHeaders sets res's SCG headers on h, after the rate-limit trio
// (SCG's X-RateLimit-Remaining replaces the trio's).
func writeSCGHeaders(h http.Header, res *Result) {
	if !res.HasSCGHeaders() {
		return
	}
	for i, name := range SCGHeaderNames {
		h[name] = []string{string(res.SCGHeader(i))}
	}
}

// BudgetKey returns the store key of the budget of key value parts under
// policy p for limit l of route: Spring Cloud Gateway's own budget for a
// policy with compat scg or scg-4.1 (scgKey), else [StateKey].
func BudgetKey(route string, l *Limit, p *ratelimit.Policy, parts []string) string {
	if key, ok := scgKey(l, p, parts); ok {
		return key
	}
	return StateKey(route, l.ID, p.Name(), parts)
}

// CanUse reports whether policy p can decide limit l for key value parts:
// false for a policy with compat scg or scg-4.1 whose Spring Cloud Gateway
// key cannot be formed (a key of several parts, or compat scg on a limit
// without SCGRouteID), since its state lives only in SCG's keys.
func CanUse(l *Limit, p *ratelimit.Policy, parts []string) bool {
	if !p.Compat().SCG() {
		return true
	}
	_, ok := scgKey(l, p, parts)
	return ok
}

// scgKey returns Spring Cloud Gateway's key of the budget of key value
// parts under policy p for limit l: [ratelimit.SCGRouteKey] of
// l.SCGRouteID and the single part for compat scg,
// [ratelimit.SCGKey] of the single part for compat scg-4.1. ok is false
// for any other policy, a key of several parts, and compat scg without
// l.SCGRouteID.
func scgKey(l *Limit, p *ratelimit.Policy, parts []string) (key string, ok bool) {
	if len(parts) != 1 {
		return "", false
	}
	switch p.Compat() {
	case ratelimit.CompatSCG:
		if l.SCGRouteID != "" {
			return ratelimit.SCGRouteKey(l.SCGRouteID, parts[0]), true
		}
	case ratelimit.CompatSCG41:
		return ratelimit.SCGKey(parts[0]), true
	}
	return "", false
}
