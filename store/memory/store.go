// Package memory is an in-process [ratelimit.Store]: the limits of one
// process, kept in sharded hash tables.
//
// # Sharding and concurrency
//
// A Store is safe for concurrent use. Keys are spread over a power-of-two
// number of shards by a seeded hash of the key; each shard is a table guarded
// by its own mutex, so requests for different keys rarely wait for each other.
// Evaluate over several limits locks the distinct shards involved in
// ascending order (so two calls can never deadlock), reads the clock once and
// decides every limit under those locks: the request is admitted, and every
// admitting limit consumes, or nothing changes at all. Deciding a single
// limit for a key that is already tracked allocates nothing.
//
// # The table
//
// A shard's table is an open-addressing hash table built for this store
// rather than a Go map, so that deciding for a tracked key reads one slot at
// a random place in memory, where a Go map of pointers reads its control word
// and slot and then the state they point to. It is a power-of-two array of
// 64-byte slots, each holding the key's digest, the policy that wrote the
// state, the expiry and the state itself inline: one slot is one cache line.
// A digest is two 64-bit hashes of the key under secret per-store seeds; the
// key's bytes are never kept, so a key of 8 KB costs what a key of 8 bytes
// does (digest.go bounds the chance of two keys sharing a digest). The low
// bits of the digest's first hash choose the shard and the bits above them
// the home slot; a lookup probes linearly from there, comparing both hashes,
// and stops at an empty slot (hash 0; a stored hash always has its top bit
// set). The array doubles, rehashing every
// key, before it would be more than 7/8 full. A deletion shifts the later
// keys of its probe run back into the gap, so there are no tombstones and the
// sweeper removes expired keys in place, in one pass. Evaluate over several
// limits makes room for all its insertions before it looks anything up, and
// deletes the keys it inserted but did not keep only after storing the rest,
// so that no slot it works on moves under it. The two fields only the sliding
// window and the sliding log use (the previous window's count and the log)
// live in a side array of cold records, indexed from the slot, so the other
// algorithms' slots stay one line. Once the keys left after a sweep are a
// quarter of the most the table held, it is rebuilt at the smallest size that
// holds them, which gives the memory of a burst back. At 100k token-bucket
// keys in 256 shards the tables take about 84 B per key (64 B slots at a load
// between 7/16 and 7/8), whatever the keys' length.
// The shared overflow budgets (see below) stay in a Go map; there are few.
//
// # Expiry
//
// A key is kept for [kit.TTL] of its last admitting decision, that is,
// until its state is equivalent to no state at all. A key past that time is
// treated as unset even before it is removed, and a sweeper goroutine removes
// such keys every Options.SweepInterval, locking one shard at a time. Close
// stops the sweeper.
//
// # The cap on tracked keys
//
// At most Options.MaxKeys keys are tracked, split evenly over the shards.
// When a new key arrives at a shard that is full, no tracked key is evicted
// and the request is not waved through either: it is decided against an
// overflow budget shared by every untracked key under the same policy name
// and algorithm. A flood of distinct keys is therefore limited as a whole: per
// policy, at most one key's budget beyond what the tracked keys admit. That is
// stricter than per-key limiting and never unlimited, and the live state of
// tracked keys stays exact. [Store.Stats] counts such requests, and
// Options.OnOverflow hears of each. New keys are
// tracked again once the sweeper has made room in their shard. Reset never
// touches an overflow budget.
//
// # Time
//
// With the system clock (a nil Options.Clock or [ratelimit.SystemClock]) the
// store measures time on the monotonic clock from the moment it was created,
// so a step of the wall clock neither refills buckets nor resets windows
// (windows stay aligned to the wall clock as it read when the store was made).
// Any other Clock is read as it is: a [kit.ManualClock] moves only when
// told, which is how exact timelines are tested.
package memory

import (
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// Defaults applied by New to zero Options fields.
const (
	// DefaultShards is the number of shards when Options.Shards is zero.
	DefaultShards = 256
	// DefaultMaxKeys is the cap on tracked keys when Options.MaxKeys is zero.
	DefaultMaxKeys = 1 << 20
	// DefaultSweepInterval is the sweep period when Options.SweepInterval is zero.
	DefaultSweepInterval = time.Second
	// maxShards bounds Options.Shards: more shards only waste memory.
	maxShards = 1 << 16
)

// Options configures a Store. The zero value is ready to use.
type Options struct {
	// Clock tells the time. Nil means the system clock, read on its monotonic
	// reading (see the package documentation).
	Clock ratelimit.Clock
	// Shards is the number of independently locked shards, at most 65536. It
	// is rounded up to a power of two, then halved while it exceeds MaxKeys so
	// that each shard holds at least one key. Zero means 256.
	Shards int
	// MaxKeys caps the number of keys tracked at once. It is split evenly over
	// the shards (MaxKeys/Shards each, rounded down), so a shard can fill up
	// before the whole store does. Expired keys count until swept. A new key
	// arriving at a full shard evicts nothing: it is limited together with every
	// other untracked key of its policy, in one shared budget per policy name and
	// algorithm, until the sweeper makes room. A limit is never lifted because
	// of the cap. Zero means 1<<20.
	MaxKeys int
	// SweepInterval is how often idle keys past their TTL are removed. Zero means
	// one second.
	SweepInterval time.Duration
	// OnOverflow, if set, is called after each Evaluate that decided n ≥ 1
	// limits against an overflow budget because their keys found their shard
	// full (see MaxKeys), once Stats().OverflowHits counts them. It is called
	// on the deciding goroutine with no lock of the store held, so it should
	// be quick (a counter, an occasional log line). Nil means nothing is
	// called.
	OnOverflow func(n int)
}

// Store is an in-process, sharded [ratelimit.Store]. It is safe for concurrent
// use. Create one with New and Close it when done, to stop its sweeper.
type Store struct {
	clock      ratelimit.Clock // nil: monotonic system time from base
	base       time.Time
	baseMicros int64

	seeds    seeds
	shards   []shard
	mask     uint64
	perShard int
	overflow overflow
	leaseMu  sync.Mutex
	leases   leases

	overflowHits atomic.Uint64
	expired      atomic.Uint64
	onOverflow   func(n int)

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var _ ratelimit.Store = (*Store)(nil)

// shard is one independently locked part of the key space. It is padded to
// two cache lines so that two shards' locks never share one.
type shard struct {
	mu sync.Mutex
	t  table
	_  [48]byte // TestSlotSize keeps the shard at 128 bytes
}

// entry is the state of one overflow budget.
type entry struct {
	state kit.State
	// policy wrote state; a policy of another algorithm treats state as unset.
	// Nil for an entry created during an Evaluate that has not stored yet.
	policy    *ratelimit.Policy
	expiresAt int64 // µs; from then on state is equivalent to no state
}

// overflow holds the shared budgets of keys that found their shard full, one
// per policy name and algorithm. Its lock is taken after any shard lock.
type overflow struct {
	mu sync.Mutex
	m  map[overflowKey]*entry
}

type overflowKey struct {
	policy    string
	algorithm ratelimit.Algorithm
}

// Stats describes a Store at one moment.
type Stats struct {
	// Keys is the number of keys tracked, not counting overflow budgets.
	Keys int
	// OverflowHits counts the limits decided against a shared overflow budget
	// because their key's shard was full (see Options.MaxKeys).
	OverflowHits uint64
	// Expired counts the idle keys the sweeper has removed.
	Expired uint64
}

// New validates o and returns a Store with its sweeper running. Every
// problem with o is reported, joined.
func New(o Options) (*Store, error) {
	var errs []error
	if o.Shards < 0 || o.Shards > maxShards {
		errs = append(errs, fmt.Errorf("memory store: shards must be within 0..%d, got %d", maxShards, o.Shards))
	}
	if o.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("memory store: max keys must not be negative, got %d", o.MaxKeys))
	}
	if o.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("memory store: sweep interval must not be negative, got %v", o.SweepInterval))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	o = withDefaults(o)
	n := 1 << bits.Len(uint(o.Shards-1)) // round up to a power of two
	for n > o.MaxKeys {
		n /= 2
	}
	s := &Store{
		seeds:      newSeeds(),
		shards:     make([]shard, n),
		mask:       uint64(n - 1),
		perShard:   o.MaxKeys / n,
		overflow:   overflow{m: make(map[overflowKey]*entry)},
		leases:     leases{m: make(map[string]map[string]int64)},
		onOverflow: o.OnOverflow,
		stop:       make(chan struct{}),
		done:       make(chan struct{}),
	}
	if _, system := o.Clock.(ratelimit.SystemClock); !system {
		s.clock = o.Clock
	}
	// A whole microsecond (Add keeps the monotonic reading), so that the
	// store's time, baseMicros plus whole microseconds elapsed, is the wall
	// clock's floored to the microsecond, as a caller reading time.Now()
	// around a decision sees it.
	now := time.Now()
	s.base = now.Add(-time.Duration(now.Nanosecond() % 1000))
	s.baseMicros = s.base.UnixMicro()
	go s.sweepEvery(o.SweepInterval)
	return s, nil
}

// withDefaults fills in the zero fields of o.
func withDefaults(o Options) Options {
	if o.Shards == 0 {
		o.Shards = DefaultShards
	}
	if o.MaxKeys == 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	return o
}

// Close stops the sweeper and waits for it to return. It always returns nil
// and may be called more than once. The store still decides after Close, but
// idle keys are no longer removed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.done
	})
	return nil
}

// Stats returns the store's current counts. It locks each shard in turn, so it
// is meant for metrics and tests, not for every request.
func (s *Store) Stats() Stats {
	st := Stats{OverflowHits: s.overflowHits.Load(), Expired: s.expired.Load()}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += sh.t.len()
		sh.mu.Unlock()
	}
	return st
}

// nowMicros returns the store's time in Unix microseconds.
func (s *Store) nowMicros() int64 {
	if s.clock == nil {
		// time.Since uses the monotonic reading of s.base.
		return s.baseMicros + int64(time.Since(s.base)/time.Microsecond)
	}
	return s.clock.Now().UnixMicro()
}

// shardIndex returns the index of key's shard. It does not allocate.
func (s *Store) shardIndex(key string) int { return int(maphash.String(s.seeds.hash, key) & s.mask) }

// stateFor returns the state p should start from at now: e's state, or no
// state when e has expired or was written by another algorithm.
func (e *entry) stateFor(p *ratelimit.Policy, now int64) kit.State {
	if e.policy == nil || now >= e.expiresAt ||
		(e.policy != p && e.policy.Algorithm() != p.Algorithm()) {
		// Not e's sliding-log array: a step appends into it, and a clock set
		// back could make the stored state current again.
		return kit.State{}
	}
	return e.state
}

// step decides a request of cost n under p at now against e's state into
// *d, and stores the new state if the request is admitted.
func (e *entry) step(p *ratelimit.Policy, now, n int64, d *ratelimit.Decision) {
	if e.policy != p || now >= e.expiresAt {
		if e.policy == nil || now >= e.expiresAt || e.policy.Algorithm() != p.Algorithm() {
			// From no state a valid cost is always admitted, so this is
			// overwritten below; the log's array is kept for reuse.
			e.state = kit.State{Log: e.state.Log[:0]}
		}
	}
	log := e.state.Log
	kit.StepAt(p, &e.state, now, n, d)
	if d.Allowed {
		e.state.Log = reuseLog(log, e.state.Log)
		e.policy, e.expiresAt = p, now+kit.TTL(*d).Microseconds()
	}
}

// store records st as e's state, written by p and kept until expiresAt.
func (e *entry) store(st kit.State, p *ratelimit.Policy, expiresAt int64) {
	st.Log = reuseLog(e.state.Log, st.Log)
	e.state, e.policy, e.expiresAt = st, p, expiresAt
}

// reuseLog returns next, a sliding log that StepAt derived from old by
// dropping entries from the front and appending, moved back to the start of
// old's array when it still lives there. Without this, every dropped entry
// would shrink the array's usable capacity and appends would keep
// reallocating.
func reuseLog(old, next []kit.LogEntry) []kit.LogEntry {
	if cap(old) == 0 || len(next) == 0 || cap(next) == cap(old) {
		return next
	}
	full := old[:cap(old)]
	if &full[len(full)-1] != &next[:cap(next)][cap(next)-1] {
		return next // append moved it to a new array
	}
	return full[:copy(full, next)]
}
