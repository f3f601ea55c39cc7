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
	level, last = leak(iv, level, last, now)
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

// leak takes out the whole units leaked since last (one every iv µs) and
// returns the level and the time the last whole unit leaked; an empty bucket
// has leaked up to now. The Lua scripts' leak, shared by their step and
// refund, mirrors it.
func leak(iv, level, last, now int64) (int64, int64) {
	if now > last {
		leaked := (now - last) / iv
		if leaked >= level {
			return 0, now
		}
		return level - leaked, last + leaked*iv
	}
	return level, last
}
