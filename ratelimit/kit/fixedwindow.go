package kit

import "github.com/sluice-gw/sluice/ratelimit"

// fixedWindowAt: at most L units per window [k·W, (k+1)·W). State T = window
// index k, N = units admitted in it. Admits when count + n ≤ L.
func fixedWindowAt(p *policy, s *State, now, n int64, out *ratelimit.Decision) {
	l, w := p.max, p.window
	idx := now / w
	count := int64(0)
	if s.Set && s.T >= idx {
		// s.T > idx only if the clock went back: keep the newer window
		// rather than mint a fresh one.
		idx, count = s.T, s.N
	}
	end := (idx+1)*w - now
	d := ratelimit.Decision{Limit: l}
	if count+n <= l {
		count += n
		d.Allowed = true
		*s = State{Set: true, N: count, T: idx}
	} else {
		d.RetryAfter = micros(end)
	}
	d.Remaining = l - count
	if count > 0 {
		d.Reset = micros(end)
	}
	*out = d
}
