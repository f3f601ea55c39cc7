package fallback

import (
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// debtShards is the number of independently locked parts of the debts.
const debtShards = 16

// debtSweepInterval is how often, at most, owes sweeps every shard for
// expired debts, so that the map empties and the fast path returns.
const debtSweepInterval = 10 * time.Second

// debts remembers the keys the fallback admitted requests for, each until
// its local state would be back to full: while a key owes, its requests are
// decided local-first (see the package documentation). It is safe for
// concurrent use.
type debts struct {
	clock     ratelimit.Clock // nil: monotonic time since base
	base      time.Time
	seed      maphash.Seed // chooses a key's shard and the first half of its digest
	checkSeed maphash.Seed // the second half
	perShard  int
	n         atomic.Int64  // entries over all shards, expired ones included
	nextSweep atomic.Int64  // ns
	dropped   atomic.Uint64 // debts not recorded because the map was full
	shards    [debtShards]debtShard
}

// debtShard maps a key's digest to the time (ns) its debt expires.
type debtShard struct {
	mu sync.Mutex
	m  map[debtKey]int64
	_  [40]byte // keep each shard's lock on its own cache line
}

// newDebts returns empty debts for at most maxKeys keys.
func newDebts(clock ratelimit.Clock, maxKeys int) *debts {
	if _, system := clock.(ratelimit.SystemClock); system {
		clock = nil
	}
	d := &debts{clock: clock, base: time.Now(), seed: maphash.MakeSeed(), checkSeed: maphash.MakeSeed(),
		perShard: max(1, maxKeys/debtShards)}
	for i := range d.shards {
		d.shards[i].m = make(map[debtKey]int64)
	}
	return d
}

// now returns the current time in nanoseconds on the debts' clock.
func (d *debts) now() int64 {
	if d.clock == nil {
		return int64(time.Since(d.base))
	}
	return d.clock.Now().UnixNano()
}

// debtKey stands for a key in the debts: two 64-bit hashes of the key under
// the debts' secret random seeds, as the memory store keeps its keys (see
// its digest.go for the bound on two keys sharing one), so that a debt costs
// the same whatever the key's length. A key mistaken for another owing key
// is decided local-first, which only makes it stricter.
type debtKey struct{ hash, check uint64 }

// key returns key's digest and its shard.
func (d *debts) key(key string) (debtKey, *debtShard) {
	k := debtKey{hash: maphash.String(d.seed, key), check: maphash.String(d.checkSeed, key)}
	return k, &d.shards[k.hash%debtShards]
}

// owes reports whether any of reqs' keys owes. With no debts at all it
// costs one atomic load.
func (d *debts) owes(reqs []ratelimit.Request) bool {
	if d.n.Load() == 0 {
		return false
	}
	now := d.now()
	d.maybeSweep(now)
	for i := range reqs {
		k, sh := d.key(reqs[i].Key)
		sh.mu.Lock()
		exp, ok := sh.m[k]
		if ok && exp <= now {
			delete(sh.m, k)
			d.n.Add(-1)
			ok = false
		}
		sh.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// charge records the keys of an admitted local decision as owing until
// their local state is full again (kit.TTL of the decision).
func (d *debts) charge(reqs []ratelimit.Request, out []ratelimit.Decision) {
	now := d.now()
	for i := range reqs {
		if reqs[i].Shadow && !out[i].Allowed {
			continue // consumed nothing
		}
		exp := addSaturating(now, kit.TTL(out[i]).Microseconds())
		key, sh := d.key(reqs[i].Key)
		sh.mu.Lock()
		old, ok := sh.m[key]
		if !ok && len(sh.m) >= d.perShard {
			d.sweepShard(sh, now)
		}
		switch {
		case ok:
			sh.m[key] = max(old, exp)
		case len(sh.m) < d.perShard:
			sh.m[key] = exp
			d.n.Add(1)
		default:
			d.dropped.Add(1)
		}
		sh.mu.Unlock()
	}
}

// addSaturating returns now (ns) plus ttl (µs), saturating at the largest
// int64: a policy as slow as ratelimit.MinRate can report a TTL near 2^53µs.
func addSaturating(now, ttlMicros int64) int64 {
	if ttlMicros > (math.MaxInt64-now)/int64(time.Microsecond) {
		return math.MaxInt64
	}
	return now + ttlMicros*int64(time.Microsecond)
}

// forgive removes the debts of reqs' keys (their state was reset).
func (d *debts) forgive(reqs []ratelimit.Request) {
	if d.n.Load() == 0 {
		return
	}
	for i := range reqs {
		k, sh := d.key(reqs[i].Key)
		sh.mu.Lock()
		if _, ok := sh.m[k]; ok {
			delete(sh.m, k)
			d.n.Add(-1)
		}
		sh.mu.Unlock()
	}
}

// maybeSweep sweeps every shard if the last sweep is older than
// debtSweepInterval; one caller does it while the others go on.
func (d *debts) maybeSweep(now int64) {
	next := d.nextSweep.Load()
	if now < next || !d.nextSweep.CompareAndSwap(next, now+int64(debtSweepInterval)) {
		return
	}
	for i := range d.shards {
		sh := &d.shards[i]
		sh.mu.Lock()
		d.sweepShard(sh, now)
		sh.mu.Unlock()
	}
}

// sweepShard removes sh's expired debts; sh.mu must be held.
func (d *debts) sweepShard(sh *debtShard, now int64) {
	for k, exp := range sh.m {
		if exp <= now {
			delete(sh.m, k)
			d.n.Add(-1)
		}
	}
}

// len returns the number of keys recorded, expired ones included.
func (d *debts) len() int { return int(d.n.Load()) }
