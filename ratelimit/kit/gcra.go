package kit

import "github.com/sluice-gw/sluice/ratelimit"

// gcraAt: the generic cell rate algorithm with burst B and emission interval
// I µs. State T = theoretical arrival time (TAT). A request of cost n
// conforms when max(TAT, now) + n·I − now ≤ B·I. It admits exactly what a
// token bucket with capacity B and the same rate admits, in one number.
func gcraAt(p *policy, s *State, now, n int64, out *ratelimit.Decision) {
	b, iv := p.max, p.interval
	tat := now
	if s.Set {
		tat = max(s.T, now)
	}
	tau := b * iv // bounded by NewPolicy to 2^52
	newTAT := tat + n*iv
	d := ratelimit.Decision{Limit: b}
	if newTAT-now <= tau {
		d.Allowed = true
		tat = newTAT
		*s = State{Set: true, T: tat}
	} else {
		d.RetryAfter = micros(newTAT - now - tau)
	}
	d.Remaining = max(0, (tau-(tat-now))/iv) // tat-now > tau when the clock went back
	d.Reset = micros(tat - now)
	*out = d
}
