package kit

import "github.com/sluice-gw/sluice/ratelimit"

// tokenBucketAt: capacity C, one token every I µs. State N = whole tokens,
// T = time the last whole token was credited (so now-T is partial progress).
// Admits when min(C, tokens + (now-last)/I) ≥ n.
func tokenBucketAt(p *policy, s *State, now, n int64, out *ratelimit.Decision) {
	c, iv := p.max, p.interval
	tokens, last := c, now
	if s.Set {
		tokens, last = s.N, s.T
	}
	if now > last {
		refill := (now - last) / iv
		if refill >= c-tokens {
			tokens, last = c, now
		} else {
			tokens += refill
			last += refill * iv
		}
	}
	// progress towards the next token, < iv unless full; negative when the
	// clock went back, which lengthens every wait instead of shortening it.
	progress := now - last
	d := ratelimit.Decision{Limit: c}
	if tokens >= n {
		tokens -= n
		d.Allowed = true
		*s = State{Set: true, N: tokens, T: last}
	} else {
		d.RetryAfter = micros(mulSat(n-tokens, iv) - progress)
	}
	d.Remaining = tokens
	if tokens < c {
		d.Reset = micros(mulSat(c-tokens, iv) - progress)
	}
	*out = d
}
