package ratelimit

import "time"

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
// nowMicros (Unix µs) against state s. It returns the decision and the state
// to store if the request is admitted; a caller must store nothing on a denial
// (the returned state then equals s). StepAt never reads a clock and never
// modifies s's visible contents; for sliding_log the returned Log may share
// s.Log's backing array.
//
// The Redis store's Lua scripts follow these same steps line by line.
func StepAt(p *Policy, s State, nowMicros, n int64) (State, Decision) {
	var d Decision
	StepInPlaceAt(p, &s, nowMicros, n, &d)
	return s, d
}

// StepInPlaceAt is StepAt on *s, writing the decision to *d: when the
// request is admitted *s becomes the new state, otherwise *s is left as it
// was. For sliding_log the new Log may share the old one's array. It spares
// a store the copies of State and Decision that StepAt's results cost on the
// hot path.
func StepInPlaceAt(p *Policy, s *State, nowMicros, n int64, d *Decision) {
	stepAt(p, s, nowMicros, n, d)
	if d.Remaining > 0 {
		return
	}
	if !d.Allowed && n == 1 {
		d.Next = d.RetryAfter
		return
	}
	d.Next = nextUnitAt(p, *s, nowMicros)
}

// stepAt is StepInPlaceAt without Decision.Next.
func stepAt(p *Policy, s *State, nowMicros, n int64, d *Decision) {
	switch p.cfg.Algorithm {
	case TokenBucket:
		tokenBucketAt(p, s, nowMicros, n, d)
	case LeakyBucket:
		leakyBucketAt(p, s, nowMicros, n, d)
	case GCRA:
		gcraAt(p, s, nowMicros, n, d)
	case FixedWindow:
		fixedWindowAt(p, s, nowMicros, n, d)
	case SlidingWindow:
		slidingWindowAt(p, s, nowMicros, n, d)
	case SlidingLog:
		slidingLogAt(p, s, nowMicros, n, d)
	default:
		panic("ratelimit: policy with unknown algorithm " + string(p.cfg.Algorithm))
	}
}

// nextUnitAt returns the RetryAfter of a request of cost 1 against s at now:
// Decision.Next. It runs only when nothing is left, so the probe is denied
// and stores nothing; s.Log is capped so that even an append could not write
// into the caller's array.
func nextUnitAt(p *Policy, s State, now int64) time.Duration {
	s.Log = s.Log[:len(s.Log):len(s.Log)]
	var d Decision
	stepAt(p, &s, now, 1, &d)
	return d.RetryAfter
}

// TTL returns how long a state that StepAt returned in d must be kept: until
// it is equivalent to no state at all. It is never below 1µs.
func TTL(d Decision) int64 { return max(1, d.Reset.Microseconds()) }

// ceilDiv returns ⌈a/b⌉ for a ≥ 0, b > 0.
func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }
