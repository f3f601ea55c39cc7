package localdeny

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// Defaults applied by New to zero Options fields.
const (
	// DefaultMaxKeys is the cap on remembered keys when Options.MaxKeys is zero.
	DefaultMaxKeys = 100_000
	// DefaultSweepInterval is how often every shard is swept when
	// Options.SweepInterval is zero.
	DefaultSweepInterval = 10 * time.Second
)

// numShards is the number of independently locked parts of the table.
const numShards = 64

// Options configures a Store. Store is required; every other zero field has
// a working default.
type Options struct {
	// Store is the store that decides every request not answered here.
	Store ratelimit.Store
	// MaxKeys caps the number of keys remembered at once; zero means
	// DefaultMaxKeys. It is split over 64 shards, the first MaxKeys%64
	// taking one more, so with fewer than 64 some shards remember nothing.
	MaxKeys int
	// SweepInterval is about how often each shard is swept of expired
	// entries while requests come; zero means DefaultSweepInterval.
	SweepInterval time.Duration
	// Clock tells the time; it must run at the rate of the inner store's
	// clock (the Redis store's is Redis TIME). Nil means the system clock,
	// read on its monotonic reading.
	Clock ratelimit.Clock
	// Skip, if set, is called for each request the inner store denied;
	// true means its denials are not remembered. The gateway passes the
	// fallback's Engaged, so that nothing a local fallback denies (this
	// instance's count only) is remembered.
	Skip func() bool
	// OnLocal, if set, is called with the request's ctx once for each
	// Evaluate answered here, without the inner store. Views made by
	// [Store.Over] call their own hook instead.
	OnLocal func(ctx context.Context)
}

// Store remembers the denials of its inner store and answers requests for
// the keys it knows denied without asking it (see the package
// documentation). It is safe for concurrent use and needs no Close.
type Store struct {
	inner   ratelimit.Store
	clock   ratelimit.Clock // nil: monotonic system time since base
	base    time.Time
	skip    func() bool
	onLocal func(context.Context)
	seeds   struct{ hash, check maphash.Seed }

	// n counts the entries over all shards, expired ones included until
	// dropped: while it is zero nothing is looked up.
	n atomic.Int64
	// resets counts calls to forget; a denial seen by a call that started
	// before one is not remembered (see remember).
	resets atomic.Uint64
	// sweepEvery is the time between two one-shard sweeps; nextSweep is
	// when the next one is due and cursor the shard it visits.
	sweepEvery int64
	nextSweep  atomic.Int64
	cursor     atomic.Uint32

	shards [numShards]shard
}

var _ ratelimit.Store = (*Store)(nil)

// shard is one independently locked part of the table, padded so that two
// shards' locks never share a cache line.
type shard struct {
	mu  sync.Mutex
	m   map[digest]entry
	cap int
	_   [40]byte
}

// digest stands for a state key: two 64-bit hashes under the Store's two
// secret seeds (store/memory's digest.go bounds the chance of two keys
// sharing one). The low bits of hash choose the shard.
type digest struct{ hash, check uint64 }

// entry is one remembered denial. Times are nanoseconds on the Store's
// clock, saturating at math.MaxInt64.
type entry struct {
	policy    *ratelimit.Policy
	cost      int64 // the denied request's cost; a cost at least this is denied too
	until     int64 // T: from then on the entry is void
	resetAt   int64 // when Reset would have run out
	nextAt    int64 // when Next would have run out
	remaining int64
}

// New validates opts and returns an empty Store. Every problem with opts is
// reported, joined.
func New(opts Options) (*Store, error) {
	var errs []error
	if opts.Store == nil {
		errs = append(errs, errors.New("local deny store: a store to wrap is required"))
	}
	if opts.MaxKeys < 0 {
		errs = append(errs, fmt.Errorf("local deny store: max keys must not be negative, got %d", opts.MaxKeys))
	}
	if opts.SweepInterval < 0 {
		errs = append(errs, fmt.Errorf("local deny store: sweep interval must not be negative, got %v", opts.SweepInterval))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	maxKeys := opts.MaxKeys
	if maxKeys == 0 {
		maxKeys = DefaultMaxKeys
	}
	every := opts.SweepInterval
	if every == 0 {
		every = DefaultSweepInterval
	}
	s := &Store{
		inner:      opts.Store,
		base:       time.Now(),
		skip:       opts.Skip,
		onLocal:    opts.OnLocal,
		sweepEvery: max(1, int64(every)/numShards),
	}
	if _, system := opts.Clock.(ratelimit.SystemClock); opts.Clock != nil && !system {
		s.clock, s.base = opts.Clock, opts.Clock.Now()
	}
	s.seeds.hash, s.seeds.check = maphash.MakeSeed(), maphash.MakeSeed()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.cap = maxKeys / numShards
		if i < maxKeys%numShards {
			sh.cap++
		}
		sh.m = make(map[digest]entry)
	}
	return s, nil
}

// now returns the Store's time in nanoseconds since it was created.
func (s *Store) now() int64 {
	if s.clock == nil {
		return int64(time.Since(s.base))
	}
	return int64(s.clock.Now().Sub(s.base))
}

// digest returns key's digest and its shard. It does not allocate.
func (s *Store) digest(key string) (digest, *shard) {
	d := digest{hash: maphash.String(s.seeds.hash, key), check: maphash.String(s.seeds.check, key)}
	return d, &s.shards[d.hash%numShards]
}

// Len returns the number of keys remembered, expired ones included until
// they are dropped.
func (s *Store) Len() int { return int(s.n.Load()) }

// Evaluate answers reqs here when a non-shadow limit of theirs is
// remembered denied (see the package documentation) and otherwise asks the
// inner store, remembering the limits it denies. It reports Options.OnLocal
// for each request answered here.
func (s *Store) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	return s.evaluate(ctx, s.inner, s.onLocal, reqs, out)
}

// Peek asks the inner store: it reports the state as the store has it.
func (s *Store) Peek(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	return s.inner.Peek(ctx, reqs, out)
}

// Reset resets reqs' keys on the inner store and forgets them here, whether
// or not the inner store succeeded. A denial the inner store reports to a
// call that was in flight meanwhile is not remembered. It returns the inner
// store's error.
func (s *Store) Reset(ctx context.Context, reqs []ratelimit.Request) error {
	return s.reset(ctx, s.inner, reqs)
}

// Over returns a view of s that answers from s's remembered denials and
// asks inner for everything else, remembering inner's denials in s. inner
// must decide on the same state as s's own store (the gateway gives each
// route the fallback's per-route view); onLocal, if not nil, is called
// instead of Options.OnLocal for each request the view answers here.
func (s *Store) Over(inner ratelimit.Store, onLocal func(ctx context.Context)) ratelimit.Store {
	return view{s: s, inner: inner, onLocal: onLocal}
}

// view is what Over returns.
type view struct {
	s       *Store
	inner   ratelimit.Store
	onLocal func(context.Context)
}

func (v view) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	return v.s.evaluate(ctx, v.inner, v.onLocal, reqs, out)
}

func (v view) Peek(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) error {
	return v.inner.Peek(ctx, reqs, out)
}

func (v view) Reset(ctx context.Context, reqs []ratelimit.Request) error {
	return v.s.reset(ctx, v.inner, reqs)
}

// evaluate is Evaluate on inner, reporting local answers to onLocal.
func (s *Store) evaluate(ctx context.Context, inner ratelimit.Store, onLocal func(context.Context), reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	// gen is the reset count before the store is asked: a denial reported
	// after a later reset may predate it, and is not remembered.
	gen := s.resets.Load()
	start := s.now() // t0 of a denial the inner store reports below
	if s.n.Load() != 0 {
		s.maybeSweep(start)
		if s.answer(reqs, out, start) {
			if onLocal != nil {
				onLocal(ctx)
			}
			return false, nil
		}
	}
	admitted, err := inner.Evaluate(ctx, reqs, out)
	if err != nil || admitted {
		return admitted, err
	}
	s.remember(reqs, out, start, gen)
	return false, nil
}

// answer decides reqs here if a non-shadow limit of theirs is remembered
// denied at now, writing every limit's decision into out, and reports
// whether it did. When it did not, out may have been written to.
func (s *Store) answer(reqs []ratelimit.Request, out []ratelimit.Decision, now int64) bool {
	if kit.CheckRequests(reqs, out) != nil {
		return false // the inner store reports the error
	}
	hit := false
	for i := range reqs {
		r := &reqs[i]
		if !r.Shadow && s.lookup(r, now, &out[i]) {
			hit = true
			continue
		}
		m := r.Policy.Max()
		out[i] = ratelimit.Decision{Allowed: true, Limit: m, Remaining: m, Uncounted: true}
	}
	return hit
}

// lookup reports whether r is remembered denied at now, writing the
// derived denial into d if so. It drops r's entry if it has expired.
func (s *Store) lookup(r *ratelimit.Request, now int64, d *ratelimit.Decision) bool {
	k, sh := s.digest(r.Key)
	sh.mu.Lock()
	e, ok := sh.m[k]
	if ok && now >= e.until {
		delete(sh.m, k)
		s.n.Add(-1)
		ok = false
	}
	sh.mu.Unlock()
	if !ok || e.policy != r.Policy || kit.Cost(*r) < e.cost {
		return false
	}
	*d = ratelimit.Decision{
		Limit:      r.Policy.Max(),
		Remaining:  e.remaining,
		Reset:      time.Duration(max(0, e.resetAt-now)),
		RetryAfter: time.Duration(e.until - now),
		Next:       time.Duration(max(0, e.nextAt-now)),
	}
	return true
}

// remember records the limits the inner store denied in a call that started
// at start, when the reset count was gen.
func (s *Store) remember(reqs []ratelimit.Request, out []ratelimit.Decision, start int64, gen uint64) {
	if s.skip != nil && s.skip() {
		return
	}
	var now int64 // read once, when a shard is found full
	for i := range reqs {
		r, d := &reqs[i], &out[i]
		if r.Shadow || d.Allowed || d.Uncounted || d.RetryAfter <= 0 || r.Policy.IsConcurrency() || repeated(reqs, i) {
			continue
		}
		e := entry{
			policy:    r.Policy,
			cost:      kit.Cost(*r),
			until:     addSat(start, d.RetryAfter),
			resetAt:   addSat(start, d.Reset),
			nextAt:    addSat(start, d.Next),
			remaining: d.Remaining,
		}
		k, sh := s.digest(r.Key)
		sh.mu.Lock()
		switch _, ok := sh.m[k]; {
		case s.resets.Load() != gen:
			// A reset ran since the call started: the denial may
			// predate it.
		case ok:
			sh.m[k] = e
		case sh.cap == 0:
		default:
			if len(sh.m) >= sh.cap {
				if now == 0 {
					now = s.now()
				}
				s.makeRoom(sh, now)
			}
			sh.m[k] = e
			s.n.Add(1)
		}
		sh.mu.Unlock()
	}
}

// repeated reports whether reqs[i]'s key occurs elsewhere in reqs.
func repeated(reqs []ratelimit.Request, i int) bool {
	for j := range reqs {
		if j != i && reqs[j].Key == reqs[i].Key {
			return true
		}
	}
	return false
}

// addSat returns t plus d, saturating at math.MaxInt64.
func addSat(t int64, d time.Duration) int64 {
	if int64(d) > math.MaxInt64-t {
		return math.MaxInt64
	}
	return t + int64(d)
}

// reset resets reqs on inner and forgets their keys.
func (s *Store) reset(ctx context.Context, inner ratelimit.Store, reqs []ratelimit.Request) error {
	err := inner.Reset(ctx, reqs)
	s.forget(reqs)
	return err
}

// forget drops the entries of reqs' keys. The reset count is raised first,
// so that a call in flight, which may have seen the state before the
// reset, remembers nothing once an entry has been dropped: remember checks
// the count under the shard lock this takes to drop it.
func (s *Store) forget(reqs []ratelimit.Request) {
	s.resets.Add(1)
	for i := range reqs {
		k, sh := s.digest(reqs[i].Key)
		sh.mu.Lock()
		if _, ok := sh.m[k]; ok {
			delete(sh.m, k)
			s.n.Add(-1)
		}
		sh.mu.Unlock()
	}
}

// makeRoom drops sh's expired entries and, if that frees nothing, the entry
// that expires first. sh.mu must be held.
func (s *Store) makeRoom(sh *shard, now int64) {
	if s.sweepShard(sh, now) > 0 {
		return
	}
	var first digest
	soonest := int64(math.MaxInt64)
	for k, e := range sh.m {
		if e.until <= soonest {
			first, soonest = k, e.until
		}
	}
	if len(sh.m) > 0 {
		delete(sh.m, first)
		s.n.Add(-1)
	}
}

// sweepShard drops sh's entries expired at now and returns how many it
// dropped. sh.mu must be held.
func (s *Store) sweepShard(sh *shard, now int64) int {
	n := 0
	for k, e := range sh.m {
		if now >= e.until {
			delete(sh.m, k)
			n++
		}
	}
	if n > 0 {
		s.n.Add(int64(-n))
		if len(sh.m) == 0 {
			// A map keeps the room of its largest size: start afresh.
			sh.m = make(map[digest]entry)
		}
	}
	return n
}

// maybeSweep sweeps the next shard if one is due: one caller does it while
// the others go on.
func (s *Store) maybeSweep(now int64) {
	next := s.nextSweep.Load()
	if now < next || !s.nextSweep.CompareAndSwap(next, now+s.sweepEvery) {
		return
	}
	sh := &s.shards[s.cursor.Add(1)%numShards]
	sh.mu.Lock()
	s.sweepShard(sh, now)
	sh.mu.Unlock()
}
