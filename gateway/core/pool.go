package core

import (
	"errors"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// Upstream pools (docs/operations.md, "Upstream pools"). Every proxy
// route forwards through a Pool: the targets of its `pool` section, or its
// `upstream` as a pool of one target, which is never retried, ejected or
// probed and whose Pick returns it at once.
//
// A target is in rotation unless one of these holds:
//   - passive: it failed pool.passive.failures requests in a row at the
//     connection (Release with TargetConnFailed), less than eject_for ago;
//   - active: the health checker's probes (SetProbe) failed
//     unhealthy_threshold times in a row, and have not passed
//     healthy_threshold times in a row since;
//   - latency: with shedding.latency_threshold, its latency signal is at
//     or above the threshold while the signal of another target otherwise
//     in rotation is below it. Out of rotation it gets no request, so its
//     signal empties within the signal's window and it comes back.
//
// Panic mode: when no target is in rotation, a request is balanced over
// all of them, as if each were, so that a wrong health check or a fleet
// briefly refusing connections does not take the route down. Likewise a
// retry goes to a target out of rotation once it has tried every target
// in rotation: Pick returns nil only when every target was tried.

// maxPoolTargets bounds a pool's targets (config.MaxPoolTargets): Pick's
// tried set is one bit per target.
const maxPoolTargets = 64

// TargetOutcome is how a request ended on a target (Target.Release).
type TargetOutcome uint8

const (
	// TargetOK: the target answered (whatever the status, unless the
	// engine reports it as TargetFailed). It resets the target's count
	// of connection failures in a row.
	TargetOK TargetOutcome = iota
	// TargetConnFailed: the target did not answer at all: the connection
	// was refused or reset before an answer, or dialing timed out. It
	// counts toward passive ejection.
	TargetConnFailed
	// TargetFailed: another failure (a 5xx the engine counts as one, the
	// response timeout): not counted toward passive ejection, and not
	// resetting the count.
	TargetFailed
)

// Pool is a route's upstream targets and how a request picks one. It is
// safe for concurrent use.
type Pool struct {
	targets []*Target
	balance config.Balance
	retries int
	// hash reads the hash_key's value from a request (balance hash).
	hash *httplimit.Middleware
	// failures and ejectFor are pool.passive; failures 0: no passive
	// ejection.
	failures int32
	ejectFor time.Duration
	// healthy and unhealthy are the probe thresholds (SetProbe).
	healthy, unhealthy int
	// threshold is shedding.latency_threshold, 0 when off.
	threshold time.Duration
	rr        atomic.Uint64
	// latencyNext is when the targets' latency is compared again, as now
	// gives it.
	latencyNext atomic.Int64
	// now is the monotonic time since an arbitrary origin; nil: the
	// process's clock (tests set a fake one).
	now func() time.Duration
}

// Target is one upstream of a pool.
type Target struct {
	// URL is the target's upstream URL.
	URL *url.URL
	// Latency is the target's latency signal, which the proxy feeds
	// (Observe); nil unless load shedding by latency is on.
	Latency *LatencySignal

	pool     *Pool
	index    int
	id       uint64 // the hash of its URL, for hash balancing
	inflight atomic.Int64
	requests atomic.Uint64 // counted for a pool section's targets only
	// fails counts connection failures in a row; ejectedUntil is, as the
	// pool's now gives it, when a passive ejection ends (0: none).
	fails        atomic.Int32
	ejectedUntil atomic.Int64
	// probeDown: out of rotation by the health checker; slow: out for
	// latency (as last compared).
	probeDown atomic.Bool
	slow      atomic.Bool
	// probeMu guards the probe runs.
	probeMu          sync.Mutex
	probeOK, probeKO int
	series           *metrics.TargetSeries
}

// Index returns the target's position in its pool (Pool.Targets).
func (t *Target) Index() int { return t.index }

// Up reports whether the target is in rotation (see the comment at the
// top of pool.go); a target out of rotation may still be picked in panic
// mode.
func (t *Target) Up() bool {
	p := t.pool
	now := p.clock()
	if p.threshold > 0 {
		p.compareLatency(now)
	}
	return p.up(t, now)
}

// InFlight returns the requests on the target now (Acquire less Release).
func (t *Target) InFlight() int64 { return t.inflight.Load() }

// Acquire records a request (or a retry) started on the target: one more
// in flight, counted in sluice_upstream_target_requests_total for the
// targets of a route's pool section. Release ends it.
func (t *Target) Acquire() {
	t.inflight.Add(1)
	if t.series != nil {
		t.requests.Add(1)
		t.series.Request()
	}
}

// Requests returns the requests Acquire counted on the target (those of a
// route's pool section; a single upstream's are not counted, as
// sluice_requests_total counts them).
func (t *Target) Requests() uint64 { return t.requests.Load() }

// Release records the end of a request Acquire started, with its outcome.
func (t *Target) Release(o TargetOutcome) {
	t.inflight.Add(-1)
	p := t.pool
	switch {
	case o == TargetOK:
		if t.fails.Load() != 0 {
			t.fails.Store(0)
		}
	case o == TargetConnFailed && p.failures > 0:
		now := p.clock()
		until := t.ejectedUntil.Load()
		if int64(now) < until {
			return // already out: a request started before the ejection
		}
		// Of the failures that reach the count together, the one that
		// swaps ejectedUntil ejects the target, once.
		if t.fails.Add(1) >= p.failures && t.ejectedUntil.CompareAndSwap(until, int64(now+p.ejectFor)) {
			t.fails.Store(0)
			t.series.Ejected(metrics.EjectPassive)
		}
	}
}

// ejected reports whether a passive ejection holds at now.
func (t *Target) ejected(now time.Duration) bool {
	return int64(now) < t.ejectedUntil.Load()
}

// Targets returns the pool's targets, in configuration order.
func (p *Pool) Targets() []*Target { return p.targets }

// Retries returns how many other targets a request that could not reach
// one may be tried on (pool.retries; 0 for a single upstream).
func (p *Pool) Retries() int { return p.retries }

// Balance returns the pool's balancing (pool.balance).
func (p *Pool) Balance() config.Balance { return p.balance }

func (p *Pool) clock() time.Duration {
	if p.now != nil {
		return p.now()
	}
	return time.Since(monoBase)
}

// up reports whether t is in rotation at now; the latency comparison is
// the last compareLatency's.
func (p *Pool) up(t *Target, now time.Duration) bool {
	return !t.ejected(now) && !t.probeDown.Load() && !t.slow.Load()
}

// Pick returns the target a request goes to: among those in rotation that
// it has not tried (tried has bit i set for Targets()[i]), by the pool's
// balancing; when none is left in rotation, among the others it has not
// tried (panic mode when none is in rotation at all). It returns nil only
// when every target was tried. r is read only by hash balancing.
func (p *Pool) Pick(r *Request, tried uint64) *Target {
	n := len(p.targets)
	if n == 1 {
		if tried&1 != 0 {
			return nil
		}
		return p.targets[0]
	}
	now := p.clock()
	if p.threshold > 0 {
		p.compareLatency(now)
	}
	all := uint64(1)<<n - 1
	if n == 64 {
		all = ^uint64(0)
	}
	var up uint64
	for i, t := range p.targets {
		if p.up(t, now) {
			up |= 1 << i
		}
	}
	cand := up &^ tried
	if cand == 0 {
		cand = all &^ tried
	}
	if cand == 0 {
		return nil
	}
	switch p.balance {
	case config.BalanceLeastConn:
		return p.leastConn(cand)
	case config.BalanceHash:
		if r != nil && p.hash != nil {
			var buf [1]string
			if parts, ok := p.hash.KeyOf(r, 0, buf[:0]); ok {
				return p.rendezvous(cand, hashString(parts[0]))
			}
		}
	}
	return p.nth(cand, p.rr.Add(1)-1)
}

// nth returns the target of the k-th set bit of set (k taken modulo their
// number).
func (p *Pool) nth(set uint64, k uint64) *Target {
	c := uint64(0)
	for s := set; s != 0; s &= s - 1 {
		c++
	}
	k %= c
	for i := range p.targets {
		if set&(1<<i) == 0 {
			continue
		}
		if k == 0 {
			return p.targets[i]
		}
		k--
	}
	return nil // unreachable: set has c bits
}

// leastConn returns the target of set with the fewest requests in flight,
// ties broken by round robin.
func (p *Pool) leastConn(set uint64) *Target {
	least := int64(-1)
	var ties uint64
	for i, t := range p.targets {
		if set&(1<<i) == 0 {
			continue
		}
		switch n := t.inflight.Load(); {
		case least < 0 || n < least:
			least, ties = n, 1<<i
		case n == least:
			ties |= 1 << i
		}
	}
	return p.nth(ties, p.rr.Add(1)-1)
}

// rendezvous returns the target of set whose score for the key hash h is
// the highest (rendezvous hashing): a target that leaves moves only the
// keys it held, and one that comes back takes back only those.
func (p *Pool) rendezvous(set uint64, h uint64) *Target {
	var best *Target
	var bestScore uint64
	for i, t := range p.targets {
		if set&(1<<i) == 0 {
			continue
		}
		if s := mix64(h ^ t.id); best == nil || s > bestScore {
			best, bestScore = t, s
		}
	}
	return best
}

// hashString is 64-bit FNV-1a: the same in every process, so that every
// instance of a fleet sends one key to one target.
func hashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is SplitMix64's finalizer: it spreads the bits of a key's and a
// target's hashes together.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// SetProbe records a health-check probe of Targets()[i]: ok when it
// passed. A target in rotation leaves it after unhealthy_threshold failed
// probes in a row (counted in sluice_upstream_target_ejections_total with
// reason active), and comes back after healthy_threshold passed probes in
// a row. A target starts healthy.
func (p *Pool) SetProbe(i int, ok bool) {
	t := p.targets[i]
	t.probeMu.Lock()
	defer t.probeMu.Unlock()
	if ok {
		t.probeKO = 0
		t.probeOK++
		if t.probeDown.Load() && t.probeOK >= p.healthy {
			t.probeDown.Store(false)
		}
		return
	}
	t.probeOK = 0
	t.probeKO++
	if !t.probeDown.Load() && t.probeKO >= p.unhealthy {
		t.probeDown.Store(true)
		t.series.Ejected(metrics.EjectActive)
	}
}

// compareLatency works out again, at most every latencyRecompute, which
// targets are out of rotation for latency: those whose signal is at or
// above the threshold, while another target otherwise in rotation has its
// signal below it. A target newly out is counted in
// sluice_upstream_target_ejections_total with reason latency.
func (p *Pool) compareLatency(now time.Duration) {
	next := p.latencyNext.Load()
	if int64(now) < next || !p.latencyNext.CompareAndSwap(next, int64(now+latencyRecompute)) {
		return
	}
	var over uint64
	within := false
	for i, t := range p.targets {
		if t.ejected(now) || t.probeDown.Load() {
			continue
		}
		if t.Latency.get() >= p.threshold {
			over |= 1 << i
		} else {
			within = true
		}
	}
	for i, t := range p.targets {
		slow := within && over&(1<<i) != 0
		if t.slow.Swap(slow) != slow && slow {
			t.series.Ejected(metrics.EjectLatency)
		}
	}
}

// shedSignal returns the latency signal load shedding reads for the pool:
// the lowest among the targets in rotation (among all of them in panic
// mode), so that one slow target is taken out of rotation rather than
// the route shed.
func (p *Pool) shedSignal() *LatencySignal {
	if len(p.targets) == 1 {
		return p.targets[0].Latency
	}
	now := p.clock()
	p.compareLatency(now)
	var best *LatencySignal
	var bestD time.Duration
	for _, inRotation := range []bool{true, false} {
		for _, t := range p.targets {
			if inRotation && !p.up(t, now) {
				continue
			}
			if d := t.Latency.get(); best == nil || d < bestD {
				best, bestD = t.Latency, d
			}
		}
		if best != nil {
			return best
		}
	}
	return best
}

// newPool builds route rc's pool: its `pool`, or its `upstream` as a pool
// of one target.
func (t *Table) newPool(rc *config.Route) (*Pool, error) {
	urls := rc.TargetURLs()
	switch {
	case len(urls) == 0:
		return nil, errors.New("no upstream (config not validated)")
	case len(urls) > maxPoolTargets:
		return nil, errors.New("more than 64 pool targets")
	}
	p := &Pool{balance: config.BalanceRoundRobin, healthy: 1, unhealthy: 1}
	if s := t.cfg.Shedding; s != nil && s.LatencyThreshold > 0 {
		p.threshold = s.LatencyThreshold
	}
	if pc := rc.Pool; pc != nil {
		if pc.Balance != "" {
			p.balance = pc.Balance
		}
		p.retries = pc.RetryCount()
		p.failures = int32(pc.Passive.FailureCount())
		p.ejectFor = pc.Passive.EjectFor
		if h := pc.HealthCheck; h != nil {
			p.healthy, p.unhealthy = max(h.HealthyThreshold, 1), max(h.UnhealthyThreshold, 1)
		}
		if p.balance == config.BalanceHash {
			part, err := pc.HashPart()
			if err != nil {
				return nil, err
			}
			if p.hash, err = hashReader(rc.ID, part, t.ip); err != nil {
				return nil, err
			}
		}
	}
	for i, u := range urls {
		if u == nil {
			return nil, errors.New("upstream URL not parsed (config not validated)")
		}
		tg := &Target{URL: u, pool: p, index: i, id: hashString(u.String())}
		if p.threshold > 0 {
			tg.Latency = t.latencyOfURL(u)
		}
		if rc.Pool != nil {
			tg.series = t.metrics.Target(rc.ID, u.String())
		}
		p.targets = append(p.targets, tg)
	}
	return p, nil
}

// hashPolicy is the policy of the middleware hashReader builds: it is
// never evaluated.
var hashPolicy = ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "pool-hash", Algorithm: ratelimit.FixedWindow, Limit: 1, Window: time.Second})

// hashReader returns a middleware whose one limit's key is part: its KeyOf
// reads the part's value from a request as a limit's key is read (the
// client address through ip, the route id, a cookie...). It decides
// nothing and asks no store.
func hashReader(route string, part httplimit.KeyPart, ip *httplimit.IPResolver) (*httplimit.Middleware, error) {
	return httplimit.New(httplimit.Options{
		Route:  route,
		Limits: []httplimit.Limit{{ID: "hash_key", Policy: hashPolicy, Key: httplimit.Key{part}}},
		Store:  unusedStore{},
		IP:     ip,
	})
}

// unusedStore is hashReader's store, never called.
type unusedStore struct{ ratelimit.Store }
