package memory

import (
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// slotShift is the number of low hash bits that choose a key's shard; a
// table indexes its slots with the bits above them, so the keys of one shard
// still spread over all of its slots.
const slotShift = 16

// Every shard index fits in the bits below slotShift.
var _ [1<<slotShift - maxShards]struct{}

// hashMark is set in every stored hash so that a stored hash is never 0,
// which marks an empty slot. Bit 63 is never among the bits that choose a
// slot: that would take a table of 2^47 slots.
const hashMark = 1 << 63

// minSlots is the size of a table's first slot array.
const minSlots = 8

// table is one shard's keys: an open-addressing hash table with linear
// probing over a power-of-two array of slots, each holding its key's state
// inline, so looking up a tracked key and deciding on its state touches one
// 64-byte slot. Deletion shifts the rest of the probe run back (no
// tombstones), so the table holds exactly its live keys. A table is not safe
// for concurrent use; its shard's lock guards it.
//
// The sliding window's Prev and the sliding log's Log, which no other
// algorithm uses, live in a side array of cold records, referenced from the
// slot only for keys that need one.
type table struct {
	slots []slot // len 0 or a power of two ≥ minSlots
	count int    // occupied slots
	peak  int    // largest count since the slot array was last rebuilt (grown or shrunk)

	cold     []coldState
	freeCold uint32 // 1 + index of the first free cold record; 0: none
}

// slot is one key of a table and its state: 64 bytes, so that a slot array
// (a power of two of at least 512 bytes, which Go's allocator aligns to at
// least 64 bytes) keeps each slot in one cache line. The key itself is not
// kept: its digest stands for it, so a slot costs the same for any key.
type slot struct {
	hash      uint64            // the digest's hash with hashMark set; 0: the slot is empty
	check     uint64            // the digest's check
	policy    *ratelimit.Policy // wrote the state; nil: no state yet
	expiresAt int64             // µs; from then on the state is equivalent to no state
	// The state's fields other than Prev and Log (see kit.State).
	n, t int64
	cold uint32 // 1 + index in table.cold of the key's Prev and Log; 0: none (both zero)
	set  bool
	_    [8]byte // TestSlotSize keeps the slot at 64 bytes
}

// coldState holds the fields of a state that only some algorithms use. A
// free record's prev links to the next free one (1 + index; 0 ends the list).
type coldState struct {
	prev int64
	log  []kit.LogEntry
}

// home returns the index of the slot where a probe for h starts, for a slot
// array of mask+1 slots.
func home(h uint64, mask int) int { return int(h>>slotShift) & mask }

// maxLoad is the most keys a table of n slots holds before it grows: 7/8.
// The working set of the slots, not the length of probe runs, is what a
// lookup mostly pays for, and at 3/4 a table doubles while the keys would
// still fit in 7/8: at 100k keys in 256 shards (390 a shard, just over 3/4
// of 512) most slot arrays doubled, to 13 MiB in all against 8 MiB at 7/8,
// and deciding was slower than with the Go map the table replaced. The price
// is longer probe runs when the table is nearly full: a lookup of an absent
// key (a new key, or an untracked key at the cap) then probes about 32 slots
// against 8.5 at 3/4, on consecutive cache lines.
func maxLoad(n int) int { return n - n/8 }

// len returns the number of keys in the table.
func (t *table) len() int { return t.count }

// find returns the index of the slot of the key whose digest is d, or -1 if
// it is not in the table.
func (t *table) find(d digest) int {
	slots := t.slots
	if len(slots) == 0 {
		return -1
	}
	h := d.hash | hashMark
	mask := len(slots) - 1
	for i := home(h, mask); ; i = (i + 1) & mask {
		s := &slots[i]
		if s.hash == h && s.check == d.check {
			return i
		}
		if s.hash == 0 {
			return -1
		}
	}
}

// insert adds the key whose digest is d, which must not be in the table,
// with no state, and returns its slot's index. It grows the slot array first if the table is
// full, which moves every slot: an index taken before is void, unless
// reserve made room for this insertion.
func (t *table) insert(d digest) int {
	if t.count >= maxLoad(len(t.slots)) {
		t.rehash(max(minSlots, 2*len(t.slots)))
	}
	i := t.place(d.hash | hashMark)
	t.slots[i].check = d.check
	t.count++
	t.peak = max(t.peak, t.count)
	return i
}

// reserve makes room for n insertions without growing the slot array, so
// that indexes taken between them stay valid.
func (t *table) reserve(n int) {
	size := max(minSlots, len(t.slots))
	for t.count+n > maxLoad(size) {
		size *= 2
	}
	if size != len(t.slots) {
		t.rehash(size)
	}
}

// place claims the first empty slot of h's probe run for h and returns its
// index. There must be an empty slot.
func (t *table) place(h uint64) int {
	mask := len(t.slots) - 1
	i := home(h, mask)
	for t.slots[i].hash != 0 {
		i = (i + 1) & mask
	}
	t.slots[i].hash = h
	return i
}

// rehash moves every key to a new array of size slots (a power of two that
// holds them within maxLoad). The cold records stay where they are.
func (t *table) rehash(size int) {
	old := t.slots
	t.slots = make([]slot, size)
	for i := range old {
		if old[i].hash != 0 {
			t.slots[t.place(old[i].hash)] = old[i]
		}
	}
	t.peak = t.count
}

// deleteAt removes the key in slot i. Later keys of the same probe run may
// move back, into i or after it: an index taken before is void.
func (t *table) deleteAt(i int) {
	s := &t.slots[i]
	if s.cold != 0 {
		c := &t.cold[s.cold-1]
		*c = coldState{prev: int64(t.freeCold)}
		t.freeCold = s.cold
	}
	mask := len(t.slots) - 1
	hole := i
	for j := (i + 1) & mask; t.slots[j].hash != 0; j = (j + 1) & mask {
		// The key at j can fill the hole if the hole lies on its probe path,
		// from its home slot to j: it is no farther from j than its home is.
		if (j-home(t.slots[j].hash, mask))&mask >= (j-hole)&mask {
			t.slots[hole] = t.slots[j]
			hole = j
		}
	}
	t.slots[hole] = slot{}
	t.count--
}

// delete removes the key whose digest is d if it is in the table and reports
// whether it was.
func (t *table) delete(d digest) bool {
	i := t.find(d)
	if i >= 0 {
		t.deleteAt(i)
	}
	return i >= 0
}

// removeExpired deletes every key whose expiry is at or before now and
// returns how many it deleted.
func (t *table) removeExpired(now int64) int {
	if t.count == 0 {
		return 0
	}
	// Start the scan after an empty slot, at the start of a probe run: a
	// deletion only moves keys of its run back towards the scan position,
	// never behind it, so one pass sees every key.
	mask := len(t.slots) - 1
	start := 0
	for t.slots[start].hash != 0 {
		start++
	}
	removed := 0
	for k := 1; k <= len(t.slots); {
		i := (start + k) & mask
		if s := &t.slots[i]; s.hash != 0 && now >= s.expiresAt {
			t.deleteAt(i)
			removed++
			continue // another key may have moved into i
		}
		k++
	}
	return removed
}

// shrink rebuilds the table once it holds a quarter of its peak or less,
// if that makes its slot array smaller: a burst of keys would otherwise keep
// its slot array (and cold records) after the keys are gone. The new array is
// the smallest that holds the keys left; an empty table keeps none.
func (t *table) shrink() {
	if t.count > t.peak/4 {
		return
	}
	size := 0
	if t.count > 0 {
		size = minSlots
		for t.count > maxLoad(size) {
			size *= 2
		}
	}
	if size >= len(t.slots) {
		return
	}
	old, cold := t.slots, t.cold
	t.slots, t.cold, t.freeCold = nil, nil, 0
	if size > 0 {
		t.slots = make([]slot, size)
	}
	for i := range old {
		s := old[i]
		if s.hash == 0 {
			continue
		}
		if s.cold != 0 {
			t.cold = append(t.cold, cold[s.cold-1])
			s.cold = uint32(len(t.cold))
		}
		t.slots[t.place(s.hash)] = s
	}
	t.peak = t.count
}

// valid reports whether slot i holds a state that p continues at now: one
// that has not expired, written by p or by a policy of p's algorithm.
func (t *table) valid(i int, p *ratelimit.Policy, now int64) bool {
	s := &t.slots[i]
	return s.policy != nil && now < s.expiresAt &&
		(s.policy == p || s.policy.Algorithm() == p.Algorithm())
}

// stateFor returns the state p should start from at now in slot i: the
// stored state, or no state when it has expired or belongs to another
// algorithm.
func (t *table) stateFor(i int, p *ratelimit.Policy, now int64) kit.State {
	if !t.valid(i, p, now) {
		// Not the slot's sliding-log array: a step appends into it, and a
		// clock set back could make the stored state current again.
		return kit.State{}
	}
	return t.rawState(i)
}

// rawState returns slot i's state as stored, whether current or not.
func (t *table) rawState(i int) kit.State {
	s := &t.slots[i]
	st := kit.State{Set: s.set, N: s.n, T: s.t}
	if s.cold != 0 {
		c := &t.cold[s.cold-1]
		st.Prev, st.Log = c.prev, c.log
	}
	return st
}

// step decides a request of cost n under p at now against slot i's state
// into *d, and stores the new state if the request is admitted.
func (t *table) step(i int, p *ratelimit.Policy, now, n int64, d *ratelimit.Decision) {
	var st kit.State
	if s := &t.slots[i]; t.valid(i, p, now) {
		// rawState's fields, set in place: returning the whole State here
		// costs the single-key path about 15 ns.
		st.Set, st.N, st.T = s.set, s.n, s.t
		if s.cold != 0 {
			c := &t.cold[s.cold-1]
			st.Prev, st.Log = c.prev, c.log
		}
	} else if s.cold != 0 {
		// From no state a valid cost is always admitted, so this is
		// overwritten below; the log's array is kept for reuse.
		st.Log = t.cold[s.cold-1].log[:0]
	}
	kit.StepAt(p, &st, now, n, d)
	if d.Allowed {
		t.store(i, &st, p, now+kit.TTL(*d).Microseconds())
	}
}

// store records *st as slot i's state, written by p and kept until
// expiresAt.
func (t *table) store(i int, st *kit.State, p *ratelimit.Policy, expiresAt int64) {
	s := &t.slots[i]
	s.policy, s.expiresAt = p, expiresAt
	s.set, s.n, s.t = st.Set, st.N, st.T
	if s.cold == 0 && (st.Prev != 0 || st.Log != nil || usesCold(p)) {
		s.cold = t.newCold()
	}
	if s.cold != 0 {
		c := &t.cold[s.cold-1]
		c.prev, c.log = st.Prev, reuseLog(c.log, st.Log)
	}
}

// usesCold reports whether p's algorithm keeps state in Prev or Log. Such a
// key gets its cold record with its first state, so that later decisions on
// it allocate nothing.
func usesCold(p *ratelimit.Policy) bool {
	a := p.Algorithm()
	return a == ratelimit.SlidingWindow || a == ratelimit.SlidingLog
}

// newCold returns 1 + the index of a zeroed cold record, reusing a free one
// if there is one.
func (t *table) newCold() uint32 {
	if k := t.freeCold; k != 0 {
		c := &t.cold[k-1]
		t.freeCold = uint32(c.prev)
		c.prev = 0
		return k
	}
	t.cold = append(t.cold, coldState{})
	return uint32(len(t.cold))
}
