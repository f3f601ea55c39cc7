package kit

import (
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Leases is what a concurrency decision reads of a key's leases, all
// unexpired (expiry after now, in Unix µs).
type Leases struct {
	// N is the number of leases held, this request's own included.
	N int64
	// Held reports whether this request's lease is among them.
	Held bool
	// Earliest is the earliest expiry among the leases other than this
	// request's; zero when there are none.
	Earliest int64
	// Latest is the latest expiry among all of them; zero when there are none.
	Latest int64
}

// LeaseAt decides a concurrency request against s at now (Unix µs), as
// [ratelimit.LeaseStore] describes. With take it is Evaluate's step: an
// admitted request holds its lease until now+LeaseTTL afterwards; without,
// it is Peek's view (and the view of a limit whose request another limit
// denied): nothing is taken. The Redis store's script follows these same
// steps.
func LeaseAt(p *ratelimit.Policy, s Leases, now int64, take bool) ratelimit.Decision {
	ttl := p.LeaseTTL().Microseconds()
	limit := p.Max()
	d := ratelimit.Decision{Limit: limit, Allowed: s.Held || s.N < limit}
	earliest := s.Earliest
	if earliest == 0 {
		earliest = now + ttl
	}
	wait := micros(min(earliest-now, ratelimit.LeaseRetryCap.Microseconds()))
	n, latest := s.N, s.Latest
	if take && d.Allowed {
		if !s.Held {
			n++
		}
		latest = max(latest, now+ttl)
	}
	d.Remaining = max(0, limit-n)
	if latest > now {
		d.Reset = micros(latest - now)
	}
	if !d.Allowed {
		d.RetryAfter = wait
	}
	if d.Remaining == 0 {
		d.Next = wait
	}
	return d
}

// LeaseTTLMillis returns the time a key holding a lease just taken or
// renewed under p must be kept, in whole milliseconds.
func LeaseTTLMillis(p *ratelimit.Policy) int64 {
	return (p.LeaseTTL() + time.Millisecond - 1).Milliseconds()
}
