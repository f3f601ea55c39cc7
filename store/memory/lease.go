package memory

import (
	"context"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

var _ ratelimit.LeaseStore = (*Store)(nil)

// leases holds the concurrency limits' leases: per key, each lease's expiry
// in µs. A key is kept only while it holds a lease, so the table is bounded
// by the requests in flight rather than by Options.MaxKeys. Its lock is
// taken before any shard lock.
type leases struct {
	m map[string]map[string]int64
}

// view prunes key's expired leases and returns what a decision for lease id
// reads. The lease lock is held.
func (l *leases) view(key, id string, now int64) kit.Leases {
	set := l.m[key]
	var v kit.Leases
	for other, exp := range set {
		if exp <= now {
			delete(set, other)
			continue
		}
		v.N++
		v.Latest = max(v.Latest, exp)
		if other == id {
			v.Held = true
		} else if v.Earliest == 0 || exp < v.Earliest {
			v.Earliest = exp
		}
	}
	if set != nil && len(set) == 0 {
		delete(l.m, key)
	}
	return v
}

// take stores lease id on key until expiry. The lease lock is held.
func (l *leases) take(key, id string, expiry int64) {
	set := l.m[key]
	if set == nil {
		set = make(map[string]int64)
		l.m[key] = set
	}
	set[id] = expiry
}

// evaluateLeases is Evaluate for a call with concurrency limits: it decides
// them under the lease lock, then the rate limits (evaluated if every lease
// admits, else only peeked, so that nothing is consumed), and takes the
// leases only if the whole request is admitted.
func (s *Store) evaluateLeases(reqs []ratelimit.Request, out []ratelimit.Decision) bool {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	now := s.nowMicros()
	var rate []ratelimit.Request
	var rateIdx []int
	admitted := true
	for i := range reqs {
		r := &reqs[i]
		if !r.Policy.IsConcurrency() {
			rate, rateIdx = append(rate, *r), append(rateIdx, i)
			continue
		}
		out[i] = kit.LeaseAt(r.Policy, s.leases.view(r.Key, r.Lease, now), now, true)
		if !out[i].Allowed && !r.Shadow {
			admitted = false
		}
	}
	if len(rate) > 0 {
		rout := make([]ratelimit.Decision, len(rate))
		if admitted {
			admitted = s.evaluateMany(rate, rout)
		} else {
			_ = s.Peek(context.Background(), rate, rout) // valid requests: never fails
		}
		for j, i := range rateIdx {
			out[i] = rout[j]
		}
	}
	for i := range reqs {
		r := &reqs[i]
		if !r.Policy.IsConcurrency() || !out[i].Allowed {
			continue
		}
		if admitted {
			s.leases.take(r.Key, r.Lease, now+r.Policy.LeaseTTL().Microseconds())
		} else {
			out[i] = kit.LeaseAt(r.Policy, s.leases.view(r.Key, r.Lease, now), now, false)
		}
	}
	return admitted
}

// peekLease reports a concurrency limit as Peek does.
func (s *Store) peekLease(r *ratelimit.Request) ratelimit.Decision {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	now := s.nowMicros()
	return kit.LeaseAt(r.Policy, s.leases.view(r.Key, r.Lease, now), now, false)
}

// Release gives back each request's lease, as [ratelimit.LeaseStore]
// describes. It never fails.
func (s *Store) Release(_ context.Context, reqs []ratelimit.Request) error {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	for i := range reqs {
		r := &reqs[i]
		if set := s.leases.m[r.Key]; set != nil {
			delete(set, r.Lease)
			if len(set) == 0 {
				delete(s.leases.m, r.Key)
			}
		}
	}
	return nil
}

// Renew extends each request's lease to its policy's LeaseTTL from now,
// adding back a lease the store no longer holds (see
// [ratelimit.LeaseStore]), in one pass under the lease lock. It returns how
// many were added back and never fails.
func (s *Store) Renew(_ context.Context, reqs []ratelimit.Request) (int, error) {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	now := s.nowMicros()
	readded := 0
	for i := range reqs {
		r := &reqs[i]
		if r.Policy == nil || !r.Policy.IsConcurrency() || r.Lease == "" {
			continue
		}
		if exp, ok := s.leases.m[r.Key][r.Lease]; !ok || exp <= now {
			readded++
		}
		s.leases.take(r.Key, r.Lease, now+r.Policy.LeaseTTL().Microseconds())
	}
	return readded, nil
}

// resetLeases drops every lease of key.
func (s *Store) resetLeases(key string) {
	s.leaseMu.Lock()
	delete(s.leases.m, key)
	s.leaseMu.Unlock()
}

// sweepLeases removes expired leases and the keys left without any.
func (s *Store) sweepLeases() {
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	now := s.nowMicros()
	for key := range s.leases.m {
		s.leases.view(key, "", now)
	}
}
