package kit

import "github.com/sluice-gw/sluice/ratelimit"

// slidingLogAt: an exact log. State Log = admitted entries (time, cost) in
// (now−W, now], oldest first. Admits when the sum of their costs + n ≤ L.
// Entries are never merged, so two requests in the same microsecond stay two.
func slidingLogAt(p *policy, s *State, now, n int64, out *ratelimit.Decision) {
	l, w := p.max, p.window
	log := s.Log
	i := 0
	for i < len(log) && log[i].At <= now-w {
		i++
	}
	log = log[i:]
	used := int64(0)
	for _, e := range log {
		used += e.N
	}
	d := ratelimit.Decision{Limit: l}
	if used+n <= l {
		used += n
		// Keep the log ordered even if the clock went back, so that Reset (the
		// key's TTL) covers every entry.
		at := now
		if len(log) > 0 {
			at = max(at, log[len(log)-1].At)
		}
		log = append(log, LogEntry{At: at, N: n})
		d.Allowed = true
		*s = State{Set: true, Log: log}
	} else {
		// wait until enough of the oldest entries have left the window
		need, freed := used+n-l, int64(0)
		for _, e := range log {
			freed += e.N
			if freed >= need {
				d.RetryAfter = micros(e.At + w - now)
				break
			}
		}
	}
	d.Remaining = l - used
	if len(log) > 0 {
		d.Reset = micros(log[len(log)-1].At + w - now)
	}
	*out = d
}
