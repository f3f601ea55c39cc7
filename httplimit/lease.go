package httplimit

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// Concurrency limits. A limit whose policy is a concurrency policy takes a
// lease when the request is admitted (Decide); the engine's adapter takes
// the leases over with Hold before it forwards the request, and releases
// them when the response has ended, however it ends (Lease.Release). While
// held, the leases are renewed every third of their TTL, so a request
// longer than the TTL keeps its slot; a process that dies mid-request stops
// renewing and its leases expire within the TTL. Every lease held on one
// store is renewed in one Renew call per renewal, and a lease the store
// lost while its request still runs is added back.

// leasePrefix makes lease ids unique across processes; leaseSeq within one.
var (
	leasePrefix = func() string {
		var b [12]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
		return base64.RawURLEncoding.EncodeToString(b[:]) + "."
	}()
	leaseSeq atomic.Uint64
)

// NewLeaseID returns a lease id no other request of any process uses.
func NewLeaseID() string {
	return leasePrefix + strconv.FormatUint(leaseSeq.Add(1), 36)
}

// Lease is the set of leases one admitted request holds. Its methods are
// safe for concurrent use, and a nil *Lease holds nothing.
type Lease struct {
	store ratelimit.LeaseStore
	reqs  []ratelimit.Request
	r     *renewer
	once  sync.Once
	// renewing (the lease is in the renewal in flight) and released
	// (Release came meanwhile, and the renewer gives the lease back once
	// its renewal has ended) are guarded by r.mu.
	renewing, released bool
}

// Hold takes over the leases res holds (nil if none) and starts renewing
// them. The caller must Release the Lease when the response has ended; a
// Result whose request is forwarded without Hold keeps its slots until the
// leases expire.
func (m *Middleware) Hold(res *Result) *Lease {
	return res.takeLeases(m.leases) // New checked the store
}

// takeLeases is Hold with the store the leases are held on.
func (res *Result) takeLeases(store ratelimit.LeaseStore) *Lease {
	if l := res.held; l != nil {
		res.held = nil
		return l
	}
	if len(res.leases) == 0 {
		return nil
	}
	l := HoldLeases(store, res.leases)
	clear(res.leases)
	res.leases = res.leases[:0]
	return l
}

// HoldLeases returns a Lease holding the leases reqs (concurrency requests
// that store admitted), renewing them until Release. reqs is copied. The
// leases of every Lease held on one store value (if comparable) and of one
// renewal interval are renewed in one Renew call.
func HoldLeases(store ratelimit.LeaseStore, reqs []ratelimit.Request) *Lease {
	l := &Lease{store: store, reqs: slices.Clone(reqs)}
	every := time.Duration(1<<63 - 1)
	for _, r := range l.reqs {
		every = min(every, r.Policy.LeaseTTL()/3)
	}
	l.r = renewerFor(every)
	l.r.add(l)
	return l
}

// Release stops the renewals and gives the leases back, once: calling it
// again does nothing. It waits for the store (which bounds the call by its
// own timeout) and returns its error; a lease whose release failed expires by
// its TTL. A renewal adds back a lease the store lost, so a release must
// not overtake a renewal of the same lease: if one is in flight, Release
// returns nil at once and the renewer gives the leases back as soon as that
// renewal has ended.
func (l *Lease) Release() error {
	if l == nil {
		return nil
	}
	var err error
	l.once.Do(func() {
		if l.r.remove(l) {
			return
		}
		err = l.store.Release(context.Background(), l.reqs)
	})
	return err
}

// renewer renews every held Lease of one renewal interval, each interval,
// from one goroutine that runs while it holds any: a goroutine and a timer
// per request would cost more than the lease itself. At each tick it makes
// one Renew call per store, with every lease held on it.
type renewer struct {
	every   time.Duration
	mu      sync.Mutex
	held    map[*Lease]struct{}
	running bool
}

// renewers holds one renewer per interval in use (lease_ttl/3 of the
// policies configured: few).
var renewers sync.Map // time.Duration -> *renewer

func renewerFor(every time.Duration) *renewer {
	if r, ok := renewers.Load(every); ok {
		return r.(*renewer)
	}
	r, _ := renewers.LoadOrStore(every, &renewer{every: every, held: make(map[*Lease]struct{})})
	return r.(*renewer)
}

func (r *renewer) add(l *Lease) {
	r.mu.Lock()
	r.held[l] = struct{}{}
	if !r.running {
		r.running = true
		go r.loop()
	}
	r.mu.Unlock()
}

// remove stops renewing l. It reports true when a renewal of l is in
// flight: the renewer then releases l once it has ended.
func (r *renewer) remove(l *Lease) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.held, l)
	if l.renewing {
		l.released = true
		return true
	}
	return false
}

// loop renews the held leases every interval and returns once none is held
// at a tick. A failed renewal is not fatal: the next one may succeed before
// the lease expires, and adds back a lease the store lost meanwhile.
func (r *renewer) loop() {
	t := time.NewTicker(r.every)
	defer t.Stop()
	var batch []*Lease
	for range t.C {
		r.mu.Lock()
		if len(r.held) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		batch = batch[:0]
		for l := range r.held {
			l.renewing = true
			batch = append(batch, l)
		}
		r.mu.Unlock()
		r.renew(batch)
		var done []*Lease
		r.mu.Lock()
		for _, l := range batch {
			l.renewing = false
			if l.released {
				done = append(done, l)
			}
		}
		r.mu.Unlock()
		if len(done) > 0 {
			r.release(done)
		}
		clear(batch)
	}
}

// renew makes one Renew call per store for the leases of batch, all
// concurrently, each bounded by the interval.
func (r *renewer) renew(batch []*Lease) {
	var wg sync.WaitGroup
	for _, g := range byStore(batch) {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), r.every)
			defer cancel()
			_, _ = g.store.Renew(ctx, g.reqs) // the store counts its failures
		})
	}
	wg.Wait()
}

// release gives back the leases whose Release came during their renewal,
// one Release call per store.
func (r *renewer) release(leases []*Lease) {
	for _, g := range byStore(leases) {
		_ = g.store.Release(context.Background(), g.reqs) // an unreleased lease expires
	}
}

// storeLeases is the requests of the leases held on one store.
type storeLeases struct {
	store ratelimit.LeaseStore
	reqs  []ratelimit.Request
}

// byStore groups the requests of leases by store. A store value that is
// not comparable (a struct holding a func) is a group of its own per
// lease.
func byStore(leases []*Lease) map[any]*storeLeases {
	groups := make(map[any]*storeLeases)
	for _, l := range leases {
		var k any = l.store
		if !reflect.ValueOf(l.store).Comparable() {
			k = l
		}
		g := groups[k]
		if g == nil {
			g = &storeLeases{store: l.store}
			groups[k] = g
		}
		g.reqs = append(g.reqs, l.reqs...)
	}
	return groups
}

// usesLeases reports whether any policy l can use is a concurrency policy.
func usesLeases(l *Limit) bool {
	if l.Policy != nil && l.Policy.IsConcurrency() {
		return true
	}
	for _, p := range l.Overrides {
		if p != nil && p.IsConcurrency() {
			return true
		}
	}
	if l.Plans != nil {
		for _, p := range l.Plans.Policies {
			if p != nil && p.IsConcurrency() {
				return true
			}
		}
	}
	return false
}
