package core

import (
	"hash/maphash"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/httplimit"
)

// The latency signal of load shedding (docs/operations.md, "Load
// shedding"): per upstream, the 90th percentile over clients of each
// client's latency in the last latencyWindow. An upstream's latency is the
// time from the last byte of a request written to it to the first byte of
// its answer, so a client that sends its body slowly measures nothing of
// its own slowness. Each client counts once, however many requests it
// sends: one client calling a slow endpoint of the upstream, often or not,
// is one value among all the clients', and moves the 90th percentile only
// when a tenth of the clients are as slow.
//
// A client is the request's rate-limit keys together (every limit the
// route evaluated, in order), or, when the route has no limit or every key
// was anonymous, the client address (X-Forwarded-For believed from trusted
// proxies only): what the operator already names as a client.

const (
	// latencyBuckets is the window of the signal in one-second buckets.
	latencyBuckets = 10
	// latencyBucketKeys bounds the clients one bucket holds: beyond it, a
	// bucket keeps those of smallest id (a bottom-k sample, see
	// latencyBucket.add), so a flood of keys neither grows it nor decides
	// which clients it holds.
	latencyBucketKeys = 256
	// latencyRecompute is how often, at most, the signal is worked out
	// again from the buckets.
	latencyRecompute = 100 * time.Millisecond
)

// latencyWindow is how far back the signal looks.
const latencyWindow = latencyBuckets * time.Second

// clientSeed seeds the hashes that name clients in the latency signal; it
// is random per process, so a client cannot choose where its id falls.
var clientSeed = maphash.MakeSeed()

// LatencySignal is one upstream's latency as load shedding reads it, shared
// by the routes that forward to it. It is safe for concurrent use.
//
// The window is latencyBuckets buckets of one second; each holds, for every
// client answered in that second, its largest latency then. A client's
// latency is the one of the newest second it was answered in, and the
// signal is the 90th percentile (nearest rank) of those over the clients
// of the window; with no answer in the window it is zero. A shed request
// feeds it nothing: newcomer lets a request through for a client with no
// answer in the window, and, once no answer has been seen for
// probeInterval, probe lets one request through to measure again.
type LatencySignal struct {
	// now is the monotonic time since an arbitrary origin; nil: the
	// process's clock (tests set a fake one).
	now func() time.Duration

	p90  atomic.Int64 // the signal as last worked out, ns
	next atomic.Int64 // when it is worked out again, as now gives it
	last atomic.Int64 // when the last answer (or probe) was seen, as now gives it

	// mu guards the buckets and the newcomers' count.
	mu      sync.Mutex
	buckets [latencyBuckets]latencyBucket
	// merged and values are compute's scratch, kept between calls, under
	// cmu.
	cmu    sync.Mutex
	merged map[uint64]struct{}
	values []int64
	// newCount newcomers were let through in second newSec.
	newSec   int64
	newCount int
}

// latencyBucket is one second of the window.
type latencyBucket struct {
	sec  int64            // the second it holds, as now gives it
	keys map[uint64]int64 // client → its largest latency in that second, ns
	top  uint64           // the largest client id held
}

// probeInterval is how long a slow upstream goes without an answer before
// a request shed for latency is let through to measure it again.
const probeInterval = time.Second

var monoBase = time.Now()

func (a *LatencySignal) clock() time.Duration {
	if a.now != nil {
		return a.now()
	}
	return time.Since(monoBase)
}

// Observe records a latency d of the upstream for client (Table.ClientOf).
// A nil a records nothing.
func (a *LatencySignal) Observe(client uint64, d time.Duration) { a.observe(client, d) }

// observe is Observe.
func (a *LatencySignal) observe(client uint64, d time.Duration) {
	if a == nil {
		return
	}
	now := a.clock()
	a.last.Store(int64(now))
	sec := int64(now / time.Second)
	a.mu.Lock()
	b := &a.buckets[sec%latencyBuckets]
	if b.sec != sec {
		clear(b.keys)
		b.sec, b.top = sec, 0
	}
	b.add(client, int64(d))
	a.mu.Unlock()
}

// add records latency d (ns) of client. A full bucket keeps the
// latencyBucketKeys clients of smallest id: the ids are seeded hashes, so
// those are a uniform sample of the clients of the second, whatever their
// number and order.
func (b *latencyBucket) add(client uint64, d int64) {
	if v, ok := b.keys[client]; ok {
		if d > v {
			b.keys[client] = d
		}
		return
	}
	if b.keys == nil {
		b.keys = make(map[uint64]int64, latencyBucketKeys)
	}
	if len(b.keys) < latencyBucketKeys {
		b.keys[client] = d
		b.top = max(b.top, client)
		return
	}
	if client >= b.top {
		return
	}
	delete(b.keys, b.top)
	b.keys[client] = d
	b.top = 0
	for k := range b.keys {
		b.top = max(b.top, k)
	}
}

// get returns the signal, worked out again from the buckets when it is
// latencyRecompute old.
func (a *LatencySignal) get() time.Duration {
	now := a.clock()
	if next := a.next.Load(); int64(now) >= next && a.next.CompareAndSwap(next, int64(now+latencyRecompute)) {
		a.p90.Store(int64(a.compute(now)))
	}
	return time.Duration(a.p90.Load())
}

// compute works out the signal at now from the buckets.
func (a *LatencySignal) compute(now time.Duration) time.Duration {
	a.cmu.Lock()
	defer a.cmu.Unlock()
	a.mu.Lock()
	if a.merged == nil {
		a.merged = make(map[uint64]struct{}, latencyBucketKeys)
	}
	clear(a.merged)
	a.values = a.values[:0]
	sec := int64(now / time.Second)
	// Newest second first: a client's value is its newest.
	for s := sec; s > sec-latencyBuckets && s >= 0; s-- {
		b := &a.buckets[s%latencyBuckets]
		if b.sec != s {
			continue
		}
		for k, v := range b.keys {
			if _, seen := a.merged[k]; !seen {
				a.merged[k] = struct{}{}
				a.values = append(a.values, v)
			}
		}
	}
	a.mu.Unlock()
	// Sorted without holding up the answers being recorded.
	n := len(a.values)
	if n == 0 {
		return 0
	}
	slices.Sort(a.values)
	return time.Duration(a.values[(9*n+9)/10-1]) // nearest rank: ⌈0.9·n⌉
}

// latencyNewcomers bounds the newcomers (see newcomer) let through per
// second and upstream.
const latencyNewcomers = 64

// newcomer reports whether a request of client, about to be shed for
// latency, goes through to measure the upstream for a client it has not
// answered in the window: the clients shed would otherwise never count,
// and one slow client alone on a quiet upstream would shed every client
// that comes after it. At most latencyNewcomers a second go through, and
// only clients the newest bucket would hold.
func (a *LatencySignal) newcomer(client uint64) bool {
	now := a.clock()
	sec := int64(now / time.Second)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.newSec != sec {
		a.newSec, a.newCount = sec, 0
	}
	if a.newCount >= latencyNewcomers {
		return false
	}
	for s := sec; s > sec-latencyBuckets && s >= 0; s-- {
		b := &a.buckets[s%latencyBuckets]
		if b.sec != s {
			continue
		}
		if _, seen := b.keys[client]; seen {
			return false
		}
		if s == sec && len(b.keys) >= latencyBucketKeys && client >= b.top {
			return false
		}
	}
	a.newCount++
	return true
}

// probe reports whether a request shed for latency goes through to
// measure the upstream again; at most one per probeInterval does.
func (a *LatencySignal) probe() bool {
	now := int64(a.clock())
	last := a.last.Load()
	return now-last >= int64(probeInterval) && a.last.CompareAndSwap(last, now)
}

// latencies holds one signal per upstream (scheme and host:port), shared
// by the routes that forward to it.
type latencies struct {
	mu sync.Mutex
	m  map[string]*LatencySignal
}

// latencyOfURL returns the signal of the upstream (or pool target) u.
func (t *Table) latencyOfURL(u *url.URL) *LatencySignal {
	k := u.Scheme + "://" + u.Host
	t.latency.mu.Lock()
	defer t.latency.mu.Unlock()
	if t.latency.m == nil {
		t.latency.m = make(map[string]*LatencySignal)
	}
	a := t.latency.m[k]
	if a == nil {
		a = &LatencySignal{}
		t.latency.m[k] = a
	}
	return a
}

// clientOfKeys returns the client id of a request's rate-limit keys (every
// verdict's, in limit order), or 0 when it has none but anonymous ones.
func clientOfKeys(ev *httplimit.Event) uint64 {
	var h maphash.Hash
	h.SetSeed(clientSeed)
	keyed := false
	for i := range ev.Verdicts {
		if v := &ev.Verdicts[i]; !v.Anonymous {
			writeKey(&h, v.LimitID, v.Key)
			keyed = true
		}
	}
	if !keyed {
		return 0
	}
	return nonZero(h.Sum64())
}

// clientOfLimits returns the client id of r's rate-limit keys before the
// limits decide: the one clientOfKeys returns once they have (the limits
// whose key has a value, in order), or 0.
func clientOfLimits(mw *httplimit.Middleware, limits []httplimit.Limit, r httplimit.Request) uint64 {
	var h maphash.Hash
	h.SetSeed(clientSeed)
	keyed := false
	var buf [4]string
	for i := range limits {
		parts, ok := mw.KeyOf(r, i, buf[:0])
		if ok {
			writeKey(&h, limits[i].ID, parts)
			keyed = true
		}
	}
	if !keyed {
		return 0
	}
	return nonZero(h.Sum64())
}

// writeKey writes one limit's key to h.
func writeKey(h *maphash.Hash, limitID string, parts []string) {
	h.WriteString(limitID)
	for _, p := range parts {
		h.WriteByte(0)
		h.WriteString(p)
	}
	h.WriteByte(1)
}

// clientOfAddr returns the client id of a client address.
func clientOfAddr(a netip.Addr, ok bool) uint64 {
	if !ok {
		return 1
	}
	b := a.As16()
	return nonZero(maphash.Bytes(clientSeed, b[:]))
}

// nonZero keeps 0 for "no id".
func nonZero(id uint64) uint64 {
	if id == 0 {
		return 1
	}
	return id
}

// clientOf returns the client id of the request view reads, for the
// latency signal before the limits decide: the one of its rate-limit keys,
// or of its client address.
func (rt *Route) clientOf(view httplimit.Request) uint64 {
	if rt.mw != nil {
		if c := clientOfLimits(rt.mw, rt.limits, view); c != 0 {
			return c
		}
	}
	return clientOfAddr(rt.shed.ip.ClientIP(view))
}

// ClientOf returns r's client id for the latency signal: the one of its
// rate-limit keys, or of its client address.
func (t *Table) ClientOf(r *Request) uint64 {
	if r.client != 0 {
		return r.client
	}
	return clientOfAddr(t.ip.ClientIP(r))
}
