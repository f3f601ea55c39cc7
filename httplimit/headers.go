package httplimit

import (
	"strconv"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Header names written on every response that went through a limit
// (docs/semantics.md §5), in canonical form, so that they can be stored in an
// http.Header directly. HTTP field names are case-insensitive:
// "X-Ratelimit-Limit" is X-RateLimit-Limit.
const (
	HeaderLimit           = "X-Ratelimit-Limit"
	HeaderRemaining       = "X-Ratelimit-Remaining"
	HeaderReset           = "X-Ratelimit-Reset"
	HeaderRateLimit       = "Ratelimit"
	HeaderRateLimitPolicy = "Ratelimit-Policy"
)

// outcome is one evaluated limit as the headers see it.
type outcome struct {
	policy *ratelimit.Policy
	d      ratelimit.Decision
	cost   int64
	shadow bool
}

// hidden reports whether e stays out of the headers: a shadow limit, or one
// no store counted (Decision.Uncounted), whose full budget would be a guess.
func (e *outcome) hidden() bool { return e.shadow || e.d.Uncounted }

// setRateLimitHeaders writes the X-RateLimit-* trio of the most constrained
// limit and the IETF RateLimit and RateLimit-Policy fields (draft-ietf-httpapi-
// ratelimit-headers-10) listing every limit. Shadow limits and limits no
// store counted (Decision.Uncounted: on_error allow while the store is down)
// appear nowhere; if every limit is one of them, nothing is written. A
// request where only some limits were counted lists those alone: each value
// sent is one a store decided, and the trio describes the most constrained
// of them. On a denial the trio describes
// the denying limit with the longest RetryAfter; otherwise the one with the
// lowest Remaining. The first in limit order wins a tie.
//
// All five values are formatted into res's buffer, back to back, so that an
// adapter can write them without an allocation of its own. policyField, if
// not nil, is the RateLimit-Policy value of evals, formatted before
// (appendPolicyField).
func (res *Result) setRateLimitHeaders(now time.Time, evals []outcome, admitted bool, policyField []byte) {
	pick := -1
	for i := range evals {
		e := &evals[i]
		switch {
		case e.hidden():
		case pick < 0:
			if admitted || !e.d.Allowed {
				pick = i
			}
		case admitted && e.d.Remaining < evals[pick].d.Remaining:
			pick = i
		case !admitted && !e.d.Allowed && e.d.RetryAfter > evals[pick].d.RetryAfter:
			pick = i
		}
	}
	if pick < 0 {
		return
	}
	buf, end := res.hdr[:0], &res.end
	d := evals[pick].d
	buf = strconv.AppendInt(buf, d.Limit, 10)
	end[0] = len(buf)
	buf = strconv.AppendInt(buf, max(0, d.Remaining), 10)
	end[1] = len(buf)
	buf = strconv.AppendInt(buf, unixCeil(now.Add(d.Reset)), 10)
	end[2] = len(buf)
	if policyField != nil {
		buf = append(buf, policyField...)
	} else {
		buf = appendPolicyField(buf, evals)
	}
	end[3] = len(buf)
	sep := false
	for i := range evals {
		if e := &evals[i]; !e.hidden() {
			buf = appendRateLimitItem(buf, e, sep)
			sep = true
		}
	}
	end[4] = len(buf)
	res.hdr = buf
}

// appendPolicyField appends the RateLimit-Policy value of evals: an item
// for each one not hidden.
func appendPolicyField(b []byte, evals []outcome) []byte {
	sep := false
	for i := range evals {
		if e := &evals[i]; !e.hidden() {
			b = appendPolicyItem(b, e, sep)
			sep = true
		}
	}
	return b
}

// appendPolicyItem appends e's RateLimit-Policy item: "name";q=limit;w=seconds.
func appendPolicyItem(b []byte, e *outcome, sep bool) []byte {
	if sep {
		b = append(b, ", "...)
	}
	b = appendSFString(b, e.policy.Name())
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, e.policy.Max(), 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, max(1, ceilSeconds(e.policy.Period())), 10)
}

// appendRateLimitItem appends e's RateLimit item: "name";r=remaining;t=seconds.
func appendRateLimitItem(b []byte, e *outcome, sep bool) []byte {
	if sep {
		b = append(b, ", "...)
	}
	b = appendSFString(b, e.policy.Name())
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, max(0, e.d.Remaining), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, ceilSeconds(untilMore(e.d)), 10)
}

// untilMore is how long until at least one more unit of quota is
// available: zero while some is left, else the decision's Next, which every
// Store reports exactly for every algorithm (ratelimittest checks it).
func untilMore(d ratelimit.Decision) time.Duration {
	if d.Remaining > 0 {
		return 0
	}
	return d.Next
}

// appendSFString writes s as an RFC 8941 sf-string. Bytes outside printable
// ASCII cannot be represented and are written as '?'.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// unixCeil returns t in Unix seconds, rounded up.
func unixCeil(t time.Time) int64 {
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return s
}
