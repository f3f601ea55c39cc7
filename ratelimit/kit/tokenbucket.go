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
	tokens, last = refill(c, iv, tokens, last, now)
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

// refill credits the whole tokens earned since last (one every iv µs),
// capped at c, and returns the tokens and the time the last whole token was
// credited; a full bucket is credited up to now. The Lua scripts' refill,
// shared by their step and refund, mirrors it.
func refill(c, iv, tokens, last, now int64) (int64, int64) {
	if now > last {
		earned := (now - last) / iv
		if earned >= c-tokens {
			return c, now
		}
		return tokens + earned, last + earned*iv
	}
	return tokens, last
}
