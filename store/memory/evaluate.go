package memory

import (
	"context"
	"slices"

	"github.com/sluice-gw/sluice/ratelimit"
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
		if p := r.Policy; p != nil {
			if n := r.EffectiveCost(); n >= 1 && n <= p.Max() {
				return s.evaluateOne(r, n, &out[0]), nil
			}
		}
	}
	if err := ratelimit.CheckRequests(reqs, out); err != nil {
		return false, err
	}
	return s.evaluateMany(reqs, out), nil
}

// evaluateOne decides a single valid request of cost n into d.
func (s *Store) evaluateOne(r *ratelimit.Request, n int64, d *ratelimit.Decision) bool {
	p := r.Policy
	sh := &s.shards[s.shardIndex(r.Key)]
	sh.mu.Lock()
	now := s.nowMicros()
	e := sh.m[r.Key]
	if e == nil {
		if len(sh.m) >= s.perShard {
			sh.mu.Unlock()
			return s.evaluateOverflow(r, n, d)
		}
		e = &entry{}
		e.step(p, now, n, d)
		if d.Allowed { // always, from no state, but a denial must store nothing
			sh.insert(r.Key, e)
		}
		sh.mu.Unlock()
		return d.Allowed || r.Shadow
	}
	e.step(p, now, n, d)
	sh.mu.Unlock()
	return d.Allowed || r.Shadow
}

// evaluateOverflow decides a single request whose key found its shard full
// against the shared overflow budget of its policy.
func (s *Store) evaluateOverflow(r *ratelimit.Request, n int64, d *ratelimit.Decision) bool {
	s.overflowHits.Add(1)
	s.overflow.mu.Lock()
	now := s.nowMicros()
	e := s.overflow.entry(r.Policy)
	e.step(r.Policy, now, n, d)
	s.overflow.mu.Unlock()
	return d.Allowed || r.Shadow
}

// slot is one distinct entry an Evaluate over several limits works on. Limits
// that share a key share a slot and are decided in order against its evolving
// state, so their costs add up.
type slot struct {
	e         *entry
	shard     int    // index of the shard holding e; -1 for an overflow budget
	key       string // e's key in its shard
	fresh     bool   // e was created by this call and is dropped unless stored
	state     ratelimit.State
	policy    *ratelimit.Policy // the policy whose algorithm state belongs to
	expiresAt int64
	dirty     bool // some limit admitted: state is to be stored
}

// evaluateMany decides several valid requests all-or-nothing.
func (s *Store) evaluateMany(reqs []ratelimit.Request, out []ratelimit.Decision) bool {
	var (
		idBuf   [maxInline]int
		slotBuf [maxInline]slot
		ofBuf   [maxInline]int
		seenBuf [maxInline]ratelimit.State
	)
	ids, slots, slotOf, seen := idBuf[:0], slotBuf[:0], ofBuf[:], seenBuf[:]
	if len(reqs) > maxInline {
		ids, slots = make([]int, 0, len(reqs)), make([]slot, 0, len(reqs))
		slotOf, seen = make([]int, len(reqs)), make([]ratelimit.State, len(reqs))
	}
	ids = s.lockShards(reqs, ids)
	now := s.nowMicros()
	overflowLocked := false
	for i := range reqs {
		e, k, fresh := s.entryFor(&reqs[i], &overflowLocked)
		j := slices.IndexFunc(slots, func(sl slot) bool { return sl.e == e })
		if j < 0 {
			j = len(slots)
			slots = append(slots, slot{e: e, shard: k, key: reqs[i].Key, fresh: fresh,
				state: e.stateFor(reqs[i].Policy, now), policy: reqs[i].Policy})
		}
		slotOf[i] = j
	}
	admitted := decide(reqs, out, slots, slotOf, seen, now)
	s.finish(slots, admitted)
	if overflowLocked {
		s.overflow.mu.Unlock()
	}
	s.unlockShards(ids)
	return admitted
}

// decide steps every request in order against its slot's evolving state,
// writes the decisions to out and reports whether the request is admitted:
// every non-shadow limit admits. If it is not, nothing is consumed, and a
// limit that would admit reports its state as it is (ratelimit.PeekAt on the
// state it saw, kept in seen).
func decide(reqs []ratelimit.Request, out []ratelimit.Decision, slots []slot, slotOf []int, seen []ratelimit.State, now int64) bool {
	admitted := true
	for i := range reqs {
		r, sl := &reqs[i], &slots[slotOf[i]]
		st := sl.state
		if sl.policy != r.Policy && sl.policy.Algorithm() != r.Policy.Algorithm() {
			st = ratelimit.State{}
		}
		seen[i] = st
		d := &out[i]
		ratelimit.StepInPlaceAt(r.Policy, &st, now, r.EffectiveCost(), d)
		switch {
		case d.Allowed:
			sl.state, sl.policy, sl.expiresAt, sl.dirty = st, r.Policy, now+ratelimit.TTL(*d), true
		case !r.Shadow:
			admitted = false
		}
	}
	if !admitted {
		for i := range reqs {
			if out[i].Allowed {
				out[i] = ratelimit.PeekAt(reqs[i].Policy, seen[i], now, reqs[i].EffectiveCost())
			}
		}
	}
	return admitted
}

// entryFor returns the entry that decides r and the index of its shard: r's
// own entry, created (fresh) if absent and its shard has room, or else the
// shared overflow budget of r's policy, with shard -1. r's shard must be
// locked; the overflow table is locked on first use and *overflowLocked set.
func (s *Store) entryFor(r *ratelimit.Request, overflowLocked *bool) (e *entry, shard int, fresh bool) {
	k := s.shardIndex(r.Key)
	sh := &s.shards[k]
	if e := sh.m[r.Key]; e != nil {
		return e, k, false
	}
	if len(sh.m) < s.perShard {
		e := &entry{}
		sh.insert(r.Key, e)
		return e, k, true
	}
	if !*overflowLocked {
		s.overflow.mu.Lock()
		*overflowLocked = true
	}
	s.overflowHits.Add(1)
	return s.overflow.entry(r.Policy), -1, false
}

// finish stores the state of every slot that admitted when the request is
// admitted, and drops the entries this call created but did not store into.
// The locks are still held.
func (s *Store) finish(slots []slot, admitted bool) {
	for i := range slots {
		sl := &slots[i]
		switch {
		case admitted && sl.dirty:
			sl.e.store(sl.state, sl.policy, sl.expiresAt)
		case sl.fresh:
			delete(s.shards[sl.shard].m, sl.key)
		}
	}
}

// Peek reports each limit as Evaluate would, each on its own against the
// stored state, without consuming or creating anything. An untracked key
// whose shard is full reports its policy's overflow budget. Errors are as for
// Evaluate.
func (s *Store) Peek(_ context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	if err := ratelimit.CheckRequests(reqs, out); err != nil {
		return err
	}
	var idBuf [maxInline]int
	ids := s.lockShards(reqs, idBuf[:0])
	now := s.nowMicros()
	overflowLocked := false
	for i := range reqs {
		r := &reqs[i]
		st := ratelimit.State{}
		sh := &s.shards[s.shardIndex(r.Key)]
		if e := sh.m[r.Key]; e != nil {
			st = e.stateFor(r.Policy, now)
		} else if len(sh.m) >= s.perShard {
			if !overflowLocked {
				s.overflow.mu.Lock()
				overflowLocked = true
			}
			if e := s.overflow.m[overflowKeyOf(r.Policy)]; e != nil {
				st = e.stateFor(r.Policy, now)
			}
		}
		out[i] = ratelimit.PeekAt(r.Policy, st, now, r.EffectiveCost())
	}
	if overflowLocked {
		s.overflow.mu.Unlock()
	}
	s.unlockShards(ids)
	return nil
}

// Reset deletes the state of each request's key, restoring its full budget.
// Only Key is read. The shared overflow budgets are never reset. It never
// fails.
func (s *Store) Reset(_ context.Context, reqs []ratelimit.Request) error {
	for i := range reqs {
		sh := &s.shards[s.shardIndex(reqs[i].Key)]
		sh.mu.Lock()
		delete(sh.m, reqs[i].Key)
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
