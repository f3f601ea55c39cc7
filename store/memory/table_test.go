package memory

import (
	"fmt"
	"hash/fnv"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// tracked reports whether key has a slot in its shard's table.
func (s *Store) tracked(key string) bool {
	d := s.digest(key)
	sh := &s.shards[d.hash&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.t.find(d) >= 0
}

// storedState returns key's state as stored, whatever wrote it, or no state
// if key is not tracked.
func (s *Store) storedState(key string) kit.State {
	d := s.digest(key)
	sh := &s.shards[d.hash&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := sh.t.find(d)
	if i < 0 {
		return kit.State{}
	}
	return sh.t.rawState(i)
}

// checkOf is the check half of a test key's digest: distinct for every key
// the table tests use, whatever hash a test gives them.
func checkOf(k string) uint64 {
	f := fnv.New64a()
	f.Write([]byte("check:" + k))
	return f.Sum64()
}

// withCheck returns the digest function of a test's hash function.
func withCheck(hashOf func(string) uint64) func(string) digest {
	return func(k string) digest { return digest{hash: hashOf(k), check: checkOf(k)} }
}

// keyAt names the key in slot i of tb, one of the keys of want, or "" when
// the slot holds a digest of none of them.
func keyAt[V any](tb *table, i int, digestOf func(string) digest, want map[string]V) string {
	s := &tb.slots[i]
	for k := range want {
		if d := digestOf(k); s.hash == d.hash|hashMark && s.check == d.check {
			return k
		}
	}
	return ""
}

// checkTable fails t unless tb holds exactly the keys of want, each with its
// digest, state and expiry, and its structure is sound: every key lies on its
// probe run (no empty slot between its home slot and its slot), the load is
// within maxLoad, and the cold records are each used by one slot or free.
func checkTable(t fataler, tb *table, digestOf func(string) digest, want map[string]modelEntry) {
	t.Helper()
	if tb.len() != len(want) {
		t.Fatalf("table holds %d keys, model %d", tb.len(), len(want))
	}
	if n := len(tb.slots); n != 0 && (n < minSlots || n&(n-1) != 0) {
		t.Fatalf("%d slots, want 0 or a power of two ≥ %d", n, minSlots)
	}
	if tb.len() > maxLoad(len(tb.slots)) {
		t.Fatalf("%d keys in %d slots, over the load limit %d", tb.len(), len(tb.slots), maxLoad(len(tb.slots)))
	}
	if tb.peak < tb.len() {
		t.Fatalf("peak %d below the %d keys held", tb.peak, tb.len())
	}
	mask := len(tb.slots) - 1
	occupied := 0
	coldUsers := make(map[uint32]string)
	for j := range tb.slots {
		s := &tb.slots[j]
		if s.hash == 0 {
			if *s != (slot{}) {
				t.Fatalf("empty slot %d is not zeroed: %+v", j, *s)
			}
			continue
		}
		occupied++
		key := keyAt(tb, j, digestOf, want)
		m, ok := want[key]
		if !ok {
			t.Fatalf("slot %d holds digest %#x/%#x, of no key the model has", j, s.hash, s.check)
		}
		for k := home(s.hash, mask); k != j; k = (k + 1) & mask {
			if tb.slots[k].hash == 0 {
				t.Fatalf("%q in slot %d is cut off from its home slot %d by empty slot %d", key, j, home(s.hash, mask), k)
			}
		}
		if s.cold != 0 {
			if other, dup := coldUsers[s.cold]; dup {
				t.Fatalf("%q and %q share cold record %d", key, other, s.cold)
			}
			coldUsers[s.cold] = key
		}
		if got := tb.rawState(j); got.N != m.n || got.Prev != m.prev || len(got.Log) != m.log || s.expiresAt != m.expiresAt {
			t.Fatalf("%q: state %+v expiring at %d, want N %d, Prev %d, %d log entries, expiring at %d",
				key, got, s.expiresAt, m.n, m.prev, m.log, m.expiresAt)
		}
	}
	if occupied != tb.len() {
		t.Fatalf("%d occupied slots, count %d", occupied, tb.len())
	}
	free := 0
	for k := tb.freeCold; k != 0; k = uint32(tb.cold[k-1].prev) {
		if _, used := coldUsers[k]; used {
			t.Fatalf("cold record %d is both free and used by %q", k, coldUsers[k])
		}
		if free++; free > len(tb.cold) {
			t.Fatal("the free list of cold records loops")
		}
	}
	if len(coldUsers)+free != len(tb.cold) {
		t.Fatalf("%d cold records, %d used and %d free: some are lost", len(tb.cold), len(coldUsers), free)
	}
	for k, m := range want {
		i := tb.find(digestOf(k))
		if i < 0 {
			t.Fatalf("%q (digest %+v) not found", k, digestOf(k))
		}
		if tb.slots[i].expiresAt != m.expiresAt {
			t.Fatalf("find(%q) = slot %d of another key", k, i)
		}
	}
}

// fataler is what checkTable needs of a *testing.T or a *rapid.T.
type fataler interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// modelEntry is what the model remembers of a key's state.
type modelEntry struct {
	n, prev   int64
	log       int // number of log entries
	expiresAt int64
}

// Policies that put state in a slot only (token bucket) and in a cold record
// too (sliding window, sliding log).
var (
	hotPolicy  = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "hot", Algorithm: ratelimit.TokenBucket, Capacity: 10, Rate: 1})
	swPolicy   = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sw", Algorithm: ratelimit.SlidingWindow, Limit: 10, Window: time.Second})
	slPolicy   = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "sl", Algorithm: ratelimit.SlidingLog, Limit: 10, Window: time.Second})
	testPolicy = []*ratelimit.Policy{hotPolicy, swPolicy, slPolicy}
)

// putState stores a state derived from m into slot i, under p.
func putState(tb *table, i int, p *ratelimit.Policy, m modelEntry) {
	st := kit.State{Set: true, N: m.n, T: 1, Prev: m.prev}
	if m.log > 0 {
		st.Log = make([]kit.LogEntry, m.log)
	}
	tb.store(i, &st, p, m.expiresAt)
}

// TestTableModel runs random sequences of insertions, lookups, updates,
// deletions, reservations, sweeps and shrinks against a Go map, under hash
// functions that spread keys, that crowd them into a few home slots at the
// end of the array (so probe runs wrap around), and that give many keys the
// very same hash.
func TestTableModel(t *testing.T) {
	fnvHash := func(k string) uint64 {
		f := fnv.New64a()
		f.Write([]byte(k))
		return f.Sum64()
	}
	hashes := map[string]func(string) uint64{
		"spread": fnvHash,
		// home slot size-1-x for x < 4 in every array: runs wrap around.
		"crowded at the end": func(k string) uint64 { return -(fnvHash(k) % 4) << slotShift },
		// four distinct hashes in all.
		"equal hashes": func(k string) uint64 { return fnvHash(k) % 4 },
	}
	for name, hashOf := range hashes {
		digestOf := withCheck(hashOf)
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				tb := &table{}
				model := make(map[string]modelEntry)
				// Up to 300 distinct keys: enough to grow the table several times.
				keyGen := rapid.Custom(func(rt *rapid.T) string {
					return "k" + strconv.Itoa(rapid.IntRange(0, 299).Draw(rt, "key"))
				})
				entryGen := rapid.Custom(func(rt *rapid.T) modelEntry {
					m := modelEntry{n: rapid.Int64Range(0, 9).Draw(rt, "n"), expiresAt: rapid.Int64Range(1, 100).Draw(rt, "expiresAt")}
					switch rapid.IntRange(0, 2).Draw(rt, "kind") {
					case 1:
						m.prev = rapid.Int64Range(0, 9).Draw(rt, "prev")
					case 2:
						m.log = rapid.IntRange(1, 3).Draw(rt, "log")
					}
					return m
				})
				policyFor := func(m modelEntry) *ratelimit.Policy {
					switch {
					case m.log > 0:
						return slPolicy
					case m.prev > 0:
						return swPolicy
					}
					return testPolicy[int(m.n)%2] // a sliding window with Prev 0, or a token bucket
				}
				rt.Repeat(map[string]func(*rapid.T){
					"": func(rt *rapid.T) { checkTable(rt, tb, digestOf, model) },
					"insert or update": func(rt *rapid.T) {
						k, m := keyGen.Draw(rt, "k"), entryGen.Draw(rt, "entry")
						i := tb.find(digestOf(k))
						if _, ok := model[k]; ok != (i >= 0) {
							rt.Fatalf("find(%q) = %d, model has it: %v", k, i, ok)
						}
						if i < 0 {
							i = tb.insert(digestOf(k))
						}
						putState(tb, i, policyFor(m), m)
						model[k] = m
					},
					"lookup": func(rt *rapid.T) {
						k := keyGen.Draw(rt, "k")
						i := tb.find(digestOf(k))
						m, ok := model[k]
						if ok != (i >= 0) {
							rt.Fatalf("find(%q) = %d, model has it: %v", k, i, ok)
						}
						if ok && (keyAt(tb, i, digestOf, model) != k || tb.slots[i].expiresAt != m.expiresAt) {
							rt.Fatalf("find(%q) = slot %d holding %q", k, i, keyAt(tb, i, digestOf, model))
						}
					},
					"delete": func(rt *rapid.T) {
						k := keyGen.Draw(rt, "k")
						_, ok := model[k]
						if got := tb.delete(digestOf(k)); got != ok {
							rt.Fatalf("delete(%q) = %v, model has it: %v", k, got, ok)
						}
						delete(model, k)
					},
					"reserve and insert": func(rt *rapid.T) {
						// Indexes taken after reserve(n) survive n insertions.
						ks := rapid.SliceOfNDistinct(keyGen, 1, 20, rapid.ID).Draw(rt, "keys")
						tb.reserve(len(ks))
						slots := len(tb.slots)
						var idx []int
						for _, k := range ks {
							i := tb.find(digestOf(k))
							if i < 0 {
								i = tb.insert(digestOf(k))
							}
							idx = append(idx, i)
						}
						if len(tb.slots) != slots {
							rt.Fatalf("the table grew from %d to %d slots after reserve(%d)", slots, len(tb.slots), len(ks))
						}
						for j, k := range ks {
							m := entryGen.Draw(rt, "entry")
							if got := keyAt(tb, idx[j], digestOf, map[string]bool{k: true}); got != k {
								rt.Fatalf("slot %d of %q now holds another key", idx[j], k)
							}
							putState(tb, idx[j], policyFor(m), m)
							model[k] = m
						}
					},
					"sweep": func(rt *rapid.T) {
						now := rapid.Int64Range(0, 101).Draw(rt, "now")
						want := 0
						for k, m := range model {
							if now >= m.expiresAt {
								delete(model, k)
								want++
							}
						}
						if got := tb.removeExpired(now); got != want {
							rt.Fatalf("removeExpired(%d) = %d, want %d", now, got, want)
						}
						tb.shrink()
					},
				})
			})
		})
	}
}

// TestTableDeleteWrapsAround builds one probe run that wraps around the end
// of an 8-slot array and deletes its keys in every order, checking after
// each deletion that every key left is still found: the backward shift must
// move a key across the array's end and must not move a key before its home
// slot.
func TestTableDeleteWrapsAround(t *testing.T) {
	// Keys and their home slots: the run fills slots 5, 6, 7, 0 and 1.
	homes := map[string]int{"a": 5, "b": 6, "c": 6, "d": 7, "e": 0}
	hashOf := func(k string) uint64 { return uint64(homes[k])<<slotShift | uint64(k[0]) }
	digestOf := withCheck(hashOf)
	keys := []string{"a", "b", "c", "d", "e"}
	var orders [][]int
	var permute func(prefix []int, rest []int)
	permute = func(prefix, rest []int) {
		if len(rest) == 0 {
			orders = append(orders, prefix)
			return
		}
		for i := range rest {
			permute(append(slices.Clone(prefix), rest[i]), append(slices.Clone(rest[:i]), rest[i+1:]...))
		}
	}
	permute(nil, []int{0, 1, 2, 3, 4})
	for _, order := range orders {
		tb := &table{}
		model := make(map[string]modelEntry)
		for i, k := range keys {
			m := modelEntry{n: int64(i), expiresAt: int64(10 + i)}
			putState(tb, tb.insert(digestOf(k)), hotPolicy, m)
			model[k] = m
		}
		if len(tb.slots) != 8 {
			t.Fatalf("%d slots, want 8", len(tb.slots))
		}
		var at []string
		for i := range tb.slots {
			at = append(at, keyAt(tb, i, digestOf, model))
		}
		if want := []string{"d", "e", "", "", "", "a", "b", "c"}; !slices.Equal(at, want) {
			t.Fatalf("slots hold %q, want %q", at, want)
		}
		for _, j := range order {
			k := keys[j]
			if !tb.delete(digestOf(k)) {
				t.Fatalf("order %v: delete(%q) found nothing", order, k)
			}
			delete(model, k)
			checkTable(t, tb, digestOf, model)
		}
	}
}

// TestTableSweepWrapsAround removes expired keys from a run that wraps
// around the array's end, where a deletion moves a key from slot 0 back to
// the last slot: one sweep must still remove every expired key.
func TestTableSweepWrapsAround(t *testing.T) {
	for mask := 0; mask < 1<<5; mask++ { // which of the 5 keys expire
		homes := map[string]int{"a": 6, "b": 6, "c": 7, "d": 7, "e": 7}
		digestOf := withCheck(func(k string) uint64 { return uint64(homes[k])<<slotShift | uint64(k[0]) })
		tb := &table{}
		model := make(map[string]modelEntry)
		for i, k := range []string{"a", "b", "c", "d", "e"} {
			m := modelEntry{expiresAt: 100}
			if mask&(1<<i) != 0 {
				m.expiresAt = 1
			}
			putState(tb, tb.insert(digestOf(k)), hotPolicy, m)
			if m.expiresAt > 1 {
				model[k] = m
			}
		}
		if got, want := tb.removeExpired(50), 5-len(model); got != want {
			t.Errorf("expiring %05b: removeExpired = %d, want %d", mask, got, want)
		}
		checkTable(t, tb, digestOf, model)
	}
}

// TestTableShrinkCompactsCold checks that shrinking after a burst gives back
// the slot array and the cold records, and keeps the state of the keys left.
func TestTableShrinkCompactsCold(t *testing.T) {
	digestOf := withCheck(func(k string) uint64 { return uint64(len(k)) * 0x9e3779b97f4a7c15 })
	tb := &table{}
	model := make(map[string]modelEntry)
	for i := range 1000 {
		k := fmt.Sprint("key-", i)
		m := modelEntry{n: int64(i % 7), prev: int64(i % 5), log: i % 3, expiresAt: 10}
		if i%100 == 0 {
			m.expiresAt = 20
			model[k] = m
		}
		p := swPolicy
		if m.log > 0 {
			p = slPolicy
		}
		putState(tb, tb.insert(digestOf(k)), p, m)
	}
	if got := tb.removeExpired(15); got != 990 {
		t.Fatalf("removeExpired = %d, want 990", got)
	}
	tb.shrink()
	checkTable(t, tb, digestOf, model)
	if len(tb.slots) != 16 || len(tb.cold) != 10 || tb.peak != 10 {
		t.Errorf("after the shrink: %d slots, %d cold records, peak %d; want 16, 10 and 10", len(tb.slots), len(tb.cold), tb.peak)
	}
}

// TestSlotSize keeps a slot in one cache line and a shard's lock in cache
// lines of its own.
func TestSlotSize(t *testing.T) {
	if n := reflect.TypeFor[slot]().Size(); n != 64 {
		t.Errorf("a slot is %d bytes, want 64", n)
	}
	if n := reflect.TypeFor[shard]().Size(); n != 128 {
		t.Errorf("a shard is %d bytes, want 128", n)
	}
}

// TestMultiLimitGrowsTable decides many new keys of one shard in one call, so
// that its insertions would grow the table midway without the reservation,
// and one call that is denied, whose fresh keys must all be deleted.
func TestMultiLimitGrowsTable(t *testing.T) {
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0), Shards: 1})
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "p", Algorithm: ratelimit.TokenBucket, Capacity: 2, Rate: 1})
	var reqs []ratelimit.Request
	for i := range 3 * minSlots {
		reqs = append(reqs, ratelimit.Request{Key: fmt.Sprint("k", i), Policy: p, Cost: 1 + int64(i%2)})
	}
	if ok, out := evaluate(t, s, reqs...); !ok {
		t.Fatalf("first call denied: %+v", out)
	}
	for i, r := range reqs {
		if d := peek(t, s, r)[0]; d.Remaining != 1-int64(i%2) || (i%2 == 0) != d.Allowed {
			t.Errorf("%s after taking %d of 2: %+v", r.Key, r.Cost, d)
		}
	}
	// A call of fresh keys and one exhausted key is denied: the fresh keys
	// are not kept.
	var denied []ratelimit.Request
	for i := range 3 * minSlots {
		denied = append(denied, ratelimit.Request{Key: fmt.Sprint("new", i), Policy: p})
	}
	denied = append(denied, ratelimit.Request{Key: "k1", Policy: p})
	if ok, _ := evaluate(t, s, denied...); ok {
		t.Fatal("a call including an exhausted key was admitted")
	}
	if st := s.Stats(); st.Keys != len(reqs) {
		t.Errorf("%d keys tracked after the denied call, want %d", st.Keys, len(reqs))
	}
	tb := &s.shards[0].t
	checkTable(t, tb, s.digest, func() map[string]modelEntry {
		m := make(map[string]modelEntry)
		for _, r := range reqs {
			if i := tb.find(s.digest(r.Key)); i >= 0 {
				m[r.Key] = modelEntry{n: tb.slots[i].n, expiresAt: tb.slots[i].expiresAt}
			}
		}
		return m
	}())
}
