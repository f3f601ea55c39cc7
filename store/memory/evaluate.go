package memory

import (
	"context"
	"slices"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// maxInline is the number of limits one call decides in fixed arrays on the
// stack; longer lists allocate their working space.
const maxInline = 8

// Evaluate decides reqs all-or-nothing at the store's clock, as
// [ratelimit.Store] describes. It returns [ratelimit.ErrInvalidCost] (wrapped)
// for a cost outside a policy's range and an error for a nil policy or a short
// out; it never blocks on anything but its own shard locks, so ctx is not
// consulted. Deciding one limit for a tracked key allocates nothing.
func (s *Store) Evaluate(_ context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	if len(reqs) == 1 && len(out) > 0 {
		r := &reqs[0]
		if p := r.Policy; p != nil && !p.IsConcurrency() {
			if n := kit.Cost(*r); n >= 1 && n <= p.Max() {
				return s.evaluateOne(r, n, &out[0]), nil
			}
		}
	}
	if err := kit.CheckRequests(reqs, out); err != nil {
		return false, err
	}
	if ratelimit.HasLeases(reqs) {
		if err := kit.CheckLeases(reqs); err != nil {
			return false, err
		}
		return s.evaluateLeases(reqs, out), nil
	}
	return s.evaluateMany(reqs, out), nil
}

// evaluateOne decides a single valid request of cost n into d.
func (s *Store) evaluateOne(r *ratelimit.Request, n int64, d *ratelimit.Decision) bool {
	p := r.Policy
	k := s.digest(r.Key)
	sh := &s.shards[k.hash&s.mask]
	sh.mu.Lock()
	now := s.nowMicros()
	t := &sh.t
	if i := t.find(k); i >= 0 {
		t.step(i, p, now, n, d)
	} else if t.len() < s.perShard {
		var st kit.State
		kit.StepAt(p, &st, now, n, d)
		if d.Allowed { // always, from no state, but a denial must store nothing
			t.store(t.insert(k), &st, p, now+kit.TTL(*d).Microseconds())
		}
	} else {
		sh.mu.Unlock()
		return s.evaluateOverflow(r, n, d)
	}
	sh.mu.Unlock()
	return d.Allowed || r.Shadow
}

// evaluateOverflow decides a single request whose key found its shard full
// against the shared overflow budget of its policy.
func (s *Store) evaluateOverflow(r *ratelimit.Request, n int64, d *ratelimit.Decision) bool {
	s.overflow.mu.Lock()
	now := s.nowMicros()
	e := s.overflow.entry(r.Policy)
	e.step(r.Policy, now, n, d)
	s.overflow.mu.Unlock()
	s.overflowed(1)
	return d.Allowed || r.Shadow
}

// overflowed counts n limits decided against overflow budgets and tells
// Options.OnOverflow. No lock of the store may be held.
func (s *Store) overflowed(n int) {
	s.overflowHits.Add(uint64(n))
	if s.onOverflow != nil {
		s.onOverflow(n)
	}
}

// ref is one distinct state an Evaluate over several limits works on: a
// slot of a shard's table or an overflow budget. Limits that share a key
// share a ref and are decided in order against its evolving state, so their
// costs add up.
type ref struct {
	shard     int    // index of the shard whose table holds the key; -1 for an overflow budget
	i         int    // index of the key's slot in that table
	of        *entry // the overflow budget, when shard is -1
	digest    digest // the key's
	fresh     bool   // the slot was inserted by this call and is deleted unless stored
	state     kit.State
	policy    *ratelimit.Policy // the policy whose algorithm state belongs to
	expiresAt int64
	dirty     bool // some limit admitted: state is to be stored
}

// evaluateMany decides several valid requests all-or-nothing. It keeps slot
// indexes across the lookups and insertions of one call, which stay valid
// because it reserves room for every insertion first (so no table grows)
// and deletes nothing until every store is done.
func (s *Store) evaluateMany(reqs []ratelimit.Request, out []ratelimit.Decision) bool {
	var (
		idBuf   [maxInline]int
		refBuf  [maxInline]ref
		ofBuf   [maxInline]int
		seenBuf [maxInline]kit.State
	)
	ids, refs, refOf, seen := idBuf[:0], refBuf[:0], ofBuf[:], seenBuf[:]
	if len(reqs) > maxInline {
		ids, refs = make([]int, 0, len(reqs)), make([]ref, 0, len(reqs))
		refOf, seen = make([]int, len(reqs)), make([]kit.State, len(reqs))
	}
	ids = s.lockShards(reqs, ids)
	for _, k := range ids {
		t := &s.shards[k].t
		t.reserve(max(0, min(len(reqs), s.perShard-t.len())))
	}
	now := s.nowMicros()
	overflowLocked, overflows := false, 0
	for i := range reqs {
		rf := s.refFor(&reqs[i], &overflowLocked)
		if rf.of != nil {
			overflows++
		}
		j := slices.IndexFunc(refs, func(o ref) bool { return o.shard == rf.shard && o.i == rf.i && o.of == rf.of })
		if j < 0 {
			j = len(refs)
			if rf.of != nil {
				rf.state = rf.of.stateFor(reqs[i].Policy, now)
			} else {
				rf.state = s.shards[rf.shard].t.stateFor(rf.i, reqs[i].Policy, now)
			}
			rf.policy = reqs[i].Policy
			refs = append(refs, rf)
		}
		refOf[i] = j
	}
	admitted := decide(reqs, out, refs, refOf, seen, now)
	s.finish(refs, admitted)
	if overflowLocked {
		s.overflow.mu.Unlock()
	}
	s.unlockShards(ids)
	if overflows > 0 {
		s.overflowed(overflows)
	}
	return admitted
}

// decide steps every request in order against its slot's evolving state,
// writes the decisions to out and reports whether the request is admitted:
// every non-shadow limit admits. If it is not, nothing is consumed, and a
// limit that would admit reports its state as it is (kit.PeekAt on the
// state it saw, kept in seen).
func decide(reqs []ratelimit.Request, out []ratelimit.Decision, refs []ref, refOf []int, seen []kit.State, now int64) bool {
	admitted := true
	for i := range reqs {
		r, sl := &reqs[i], &refs[refOf[i]]
		st := sl.state
		if sl.policy != r.Policy && sl.policy.Algorithm() != r.Policy.Algorithm() {
			st = kit.State{}
		}
		seen[i] = st
		d := &out[i]
		kit.StepAt(r.Policy, &st, now, kit.Cost(*r), d)
		switch {
		case d.Allowed:
			sl.state, sl.policy, sl.expiresAt, sl.dirty = st, r.Policy, now+kit.TTL(*d).Microseconds(), true
		case !r.Shadow:
			admitted = false
		}
	}
	if !admitted {
		for i := range reqs {
			if out[i].Allowed {
				out[i] = kit.PeekAt(reqs[i].Policy, seen[i], now, kit.Cost(reqs[i]))
			}
		}
	}
	return admitted
}

// refFor returns the state that decides r: r's own slot, inserted (fresh) if
// absent and its shard has room, or else the shared overflow budget of r's
// policy. r's shard must be locked, with room reserved for the insertion; the
// overflow table is locked on first use and *overflowLocked set.
func (s *Store) refFor(r *ratelimit.Request, overflowLocked *bool) ref {
	d := s.digest(r.Key)
	k := int(d.hash & s.mask)
	t := &s.shards[k].t
	if i := t.find(d); i >= 0 {
		return ref{shard: k, i: i, digest: d}
	}
	if t.len() < s.perShard {
		return ref{shard: k, i: t.insert(d), digest: d, fresh: true}
	}
	if !*overflowLocked {
		s.overflow.mu.Lock()
		*overflowLocked = true
	}
	return ref{shard: -1, i: -1, of: s.overflow.entry(r.Policy)}
}

// finish stores the state of every ref that admitted when the request is
// admitted, and then deletes the slots this call inserted but did not store
// into. The locks are still held. A deletion moves other slots, so it comes
// after every store, and finds its key afresh.
func (s *Store) finish(refs []ref, admitted bool) {
	for i := range refs {
		rf := &refs[i]
		switch {
		case !admitted || !rf.dirty:
		case rf.of != nil:
			rf.of.store(rf.state, rf.policy, rf.expiresAt)
		default:
			s.shards[rf.shard].t.store(rf.i, &rf.state, rf.policy, rf.expiresAt)
		}
	}
	for i := range refs {
		if rf := &refs[i]; rf.fresh && (!admitted || !rf.dirty) {
			s.shards[rf.shard].t.delete(rf.digest)
		}
	}
}

// Peek reports each limit as Evaluate would, each on its own against the
// stored state, without consuming or creating anything. An untracked key
// whose shard is full reports its policy's overflow budget. Errors are as for
// Evaluate.
func (s *Store) Peek(_ context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	if err := kit.CheckRequests(reqs, out); err != nil {
		return err
	}
	var idBuf [maxInline]int
	ids := s.lockShards(reqs, idBuf[:0])
	now := s.nowMicros()
	overflowLocked := false
	for i := range reqs {
		r := &reqs[i]
		if r.Policy.IsConcurrency() {
			continue
		}
		st := kit.State{}
		d := s.digest(r.Key)
		t := &s.shards[d.hash&s.mask].t
		if i := t.find(d); i >= 0 {
			st = t.stateFor(i, r.Policy, now)
		} else if t.len() >= s.perShard {
			if !overflowLocked {
				s.overflow.mu.Lock()
				overflowLocked = true
			}
			if e := s.overflow.m[overflowKeyOf(r.Policy)]; e != nil {
				st = e.stateFor(r.Policy, now)
			}
		}
		out[i] = kit.PeekAt(r.Policy, st, now, kit.Cost(*r))
	}
	if overflowLocked {
		s.overflow.mu.Unlock()
	}
	s.unlockShards(ids)
	for i := range reqs {
		if reqs[i].Policy.IsConcurrency() {
			out[i] = s.peekLease(&reqs[i])
		}
	}
	return nil
}

// Reset deletes the state of each request's key (its leases included),
// restoring its full budget. Only Key is read. The shared overflow budgets are never reset. It never
// fails.
func (s *Store) Reset(_ context.Context, reqs []ratelimit.Request) error {
	for i := range reqs {
		s.resetLeases(reqs[i].Key)
		d := s.digest(reqs[i].Key)
		sh := &s.shards[d.hash&s.mask]
		sh.mu.Lock()
		sh.t.delete(d)
		sh.mu.Unlock()
	}
	return nil
}

// lockShards locks the distinct shards of reqs in ascending order, the one
// order every caller uses, and returns their indexes, appended to ids[:0].
func (s *Store) lockShards(reqs []ratelimit.Request, ids []int) []int {
	ids = ids[:0]
	for i := range reqs {
		k := s.shardIndex(reqs[i].Key)
		if j, found := slices.BinarySearch(ids, k); !found {
			ids = slices.Insert(ids, j, k)
		}
	}
	for _, k := range ids {
		s.shards[k].mu.Lock()
	}
	return ids
}

// unlockShards unlocks the shards lockShards locked.
func (s *Store) unlockShards(ids []int) {
	for _, k := range ids {
		s.shards[k].mu.Unlock()
	}
}

// overflowKeyOf returns the overflow budget p's untracked keys share.
func overflowKeyOf(p *ratelimit.Policy) overflowKey {
	return overflowKey{policy: p.Name(), algorithm: p.Algorithm()}
}

// entry returns the overflow budget for p, creating it unset if need be; the
// table must be locked. The table holds one entry per policy name and
// algorithm in use, which the configuration bounds.
func (o *overflow) entry(p *ratelimit.Policy) *entry {
	k := overflowKeyOf(p)
	e := o.m[k]
	if e == nil {
		e = &entry{}
		o.m[k] = e
	}
	return e
}
