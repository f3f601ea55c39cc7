package kit

import "github.com/sluice-gw/sluice/ratelimit"

// PeekAt reports what StepAt would decide for a request of cost n at
// nowMicros, without making the request: Allowed, RetryAfter and Delay are
// those the request would get, while Remaining, Reset and Next describe the state
// as it is now, with nothing consumed. A key never seen therefore shows its
// full limit and a zero Reset.
//
// It is what Store.Peek reports, and what Store.Evaluate reports for a limit
// that would admit a request another limit denied (Allowed, Remaining
// unchanged).
//
// PeekAt never writes to s, not even to s.Log's spare capacity, so it is safe
// under a read lock shared with other readers.
func PeekAt(p *ratelimit.Policy, s State, nowMicros, n int64) ratelimit.Decision {
	s.Log = s.Log[:len(s.Log):len(s.Log)] // a step may append; make that copy
	var d ratelimit.Decision
	t := s
	StepAt(p, &t, nowMicros, n, &d)
	if d.Allowed {
		// A cost above the limit is never admitted, and a denial reports the
		// state as it is: that is the current Remaining and Reset. It is
		// 2·max, not max+1: sliding_window compares in float64, where
		// 2^53+1 rounds to 2^53 and would be admitted.
		var cur ratelimit.Decision
		t = s
		StepAt(p, &t, nowMicros, 2*p.Max(), &cur)
		d.Remaining, d.Reset, d.Next = cur.Remaining, cur.Reset, cur.Next
	}
	return d
}
