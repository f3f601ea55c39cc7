package kit

import (
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// State is the stored state of one key under one policy, for any algorithm.
// The zero value is a key with no state (never seen, or expired), which every
// algorithm treats as a full budget. Which fields are used depends on the
// algorithm:
//
//	token_bucket    N = tokens, T = last refill time (µs)
//	leaky_bucket    N = level,  T = last leak time (µs)
//	gcra            T = theoretical arrival time (µs)
//	fixed_window    N = count,  T = window index floor(now/W)
//	sliding_window  N = count of the current window, Prev = of the previous one, T = window index
//	sliding_log     Log = admitted entries, oldest first
//
// The bucket algorithms keep whole units in N and let T carry the partial
// progress towards the next unit, so no fraction is ever rounded away: that
// is how a leaky bucket at 0.5/s leaks exactly 3 in 6 s however often it is
// looked at.
type State struct {
	Set  bool
	N    int64
	Prev int64
	T    int64
	Log  []LogEntry
}

// LogEntry is one admitted request in a sliding log: its time in µs and its
// cost. Two entries at the same microsecond stay two entries.
type LogEntry struct {
	At int64
	N  int64
}

// StepAt runs one decision of p's algorithm for a request of cost n at
// nowMicros (Unix µs) against *s and writes it to *d. When the request is
// admitted *s becomes the state to store; on a denial *s is left as it was
// and the caller must store nothing. StepAt never reads a clock. For
// sliding_log the new Log may share the old one's backing array, so a
// caller that keeps the old state caps its Log first.
//
// The Redis store's Lua scripts follow these same steps line by line.
func StepAt(p *ratelimit.Policy, s *State, nowMicros, n int64, d *ratelimit.Decision) {
	var q policy
	q.load(p)
	decide(&q, s, nowMicros, n, d)
	if d.Remaining > 0 {
		return
	}
	if !d.Allowed && n == 1 {
		d.Next = d.RetryAfter
		return
	}
	d.Next = nextUnitAt(&q, *s, nowMicros)
}

// decide is StepAt without Decision.Next.
func decide(p *policy, s *State, now, n int64, d *ratelimit.Decision) {
	switch p.Algorithm() {
	case ratelimit.TokenBucket:
		tokenBucketAt(p, s, now, n, d)
	case ratelimit.LeakyBucket:
		leakyBucketAt(p, s, now, n, d)
	case ratelimit.GCRA:
		gcraAt(p, s, now, n, d)
	case ratelimit.FixedWindow:
		fixedWindowAt(p, s, now, n, d)
	case ratelimit.SlidingWindow:
		slidingWindowAt(p, s, now, n, d)
	case ratelimit.SlidingLog:
		slidingLogAt(p, s, now, n, d)
	default:
		panic("ratelimit/kit: policy with unknown algorithm " + string(p.Algorithm()))
	}
}

// nextUnitAt returns the RetryAfter of a request of cost 1 against s at now:
// Decision.Next. It runs only when nothing is left, so the probe is denied
// and stores nothing; s.Log is capped so that even an append could not write
// into the caller's array.
func nextUnitAt(p *policy, s State, now int64) time.Duration {
	s.Log = s.Log[:len(s.Log):len(s.Log)]
	var d ratelimit.Decision
	decide(p, &s, now, 1, &d)
	return d.RetryAfter
}

// TTL returns how long a state that StepAt admitted with decision d must be
// kept: until it is equivalent to no state at all. That is d.Reset, but never
// below 1µs.
func TTL(d ratelimit.Decision) time.Duration {
	return max(time.Microsecond, d.Reset)
}
