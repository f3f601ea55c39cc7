package kit

import "github.com/sluice-gw/sluice/ratelimit"

// leakyBucketAt: capacity C, one unit leaks every I µs. State N = whole units
// queued, T = time the last whole unit leaked (now-T is partial progress).
// Admits when max(0, level − (now-last)/I) + n ≤ C. In shape mode the request
// is held until the units ahead of it have leaked: level·I − progress, and a
// hold longer than max_delay is a denial.
func leakyBucketAt(p *policy, s *State, now, n int64, out *ratelimit.Decision) {
	c, iv := p.max, p.interval
	level, last := int64(0), now
	if s.Set {
		level, last = s.N, s.T
	}
	if now > last {
		leaked := (now - last) / iv
		if leaked >= level {
			level, last = 0, now
		} else {
			level -= leaked
			last += leaked * iv
		}
	}
	progress := now - last // negative when the clock went back: waits lengthen
	d := ratelimit.Decision{Limit: c}
	var wait int64 // shape mode: time the units ahead need to leak
	if level > 0 && p.Mode() == ratelimit.Shape {
		wait = mulSat(level, iv) - progress
	}
	fits := level+n <= c
	if fits && (p.maxDelay == 0 || wait <= p.maxDelay) {
		level += n
		d.Allowed = true
		d.Delay = micros(wait)
		*s = State{Set: true, N: level, T: last}
	} else {
		retry := int64(0)
		if !fits {
			retry = mulSat(level+n-c, iv) - progress
		}
		if p.maxDelay > 0 && wait > p.maxDelay {
			retry = max(retry, wait-p.maxDelay)
		}
		d.RetryAfter = micros(retry)
	}
	d.Remaining = c - level
	if level > 0 {
		d.Reset = micros(mulSat(level, iv) - progress)
	}
	*out = d
}
