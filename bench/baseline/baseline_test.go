package baseline

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// The benchmarks use the system clock, as production does. The policies
// admit every request a benchmark makes (a burst of 2^30 refilled at 1/s), so
// each iteration takes the path that writes state, and the keys' TTLs keep
// growing, so the sweeper never drops a key under measurement: what is timed
// is the steady state of keys already tracked. x/time/rate gets the same rate
// and burst.
const (
	benchRate     = 1 // per second
	benchCapacity = 1 << 30
	benchKeys     = 100_000
)

// benchPolicies returns one policy per algorithm for the benchmarks. The
// sliding log keeps one entry per admitted request, so it gets a small limit
// in a short window to keep its log (and each step's scan of it) bounded.
func benchPolicies() map[ratelimit.Algorithm]*ratelimit.Policy {
	return map[ratelimit.Algorithm]*ratelimit.Policy{
		ratelimit.TokenBucket: ratelimit.MustPolicy(ratelimit.PolicyConfig{
			Name: "bench", Algorithm: ratelimit.TokenBucket, Capacity: benchCapacity, Rate: benchRate}),
		ratelimit.LeakyBucket: ratelimit.MustPolicy(ratelimit.PolicyConfig{
			Name: "bench", Algorithm: ratelimit.LeakyBucket, Capacity: benchCapacity, Rate: benchRate}),
		ratelimit.GCRA: ratelimit.MustPolicy(ratelimit.PolicyConfig{
			Name: "bench", Algorithm: ratelimit.GCRA, Burst: benchCapacity, Rate: benchRate}),
		ratelimit.FixedWindow: ratelimit.MustPolicy(ratelimit.PolicyConfig{
			Name: "bench", Algorithm: ratelimit.FixedWindow, Limit: benchCapacity, Window: time.Second}),
		ratelimit.SlidingWindow: ratelimit.MustPolicy(ratelimit.PolicyConfig{
			Name: "bench", Algorithm: ratelimit.SlidingWindow, Limit: benchCapacity, Window: time.Second}),
		ratelimit.SlidingLog: ratelimit.MustPolicy(ratelimit.PolicyConfig{
			Name: "bench", Algorithm: ratelimit.SlidingLog, Limit: 64, Window: 100 * time.Microsecond}),
	}
}

// benchKeyList returns n distinct keys, built before the timer starts.
func benchKeyList(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "bench:user:" + strconv.Itoa(i)
	}
	return keys
}

// benchOrders are the two orders a many-key benchmark visits its keys in,
// after tracking them all in the order benchKeyList built them:
//
//   - "random": a fixed shuffle, as traffic from many callers arrives. Each
//     visit finds its key's state (and the key's bytes) at an unpredictable
//     address, which is what a keyed limiter pays in production.
//   - "seq": the order the keys (and, for a map of pointers, their states)
//     were allocated in. The hardware prefetcher streams consecutive
//     allocations, which flatters any structure that keeps a pointer per key;
//     kept to show that effect.
var benchOrders = []string{"random", "seq"}

// benchWalk returns keys in the named order (see benchOrders).
func benchWalk(keys []string, order string) []string {
	walk := slices.Clone(keys)
	if order == "random" {
		r := rand.New(rand.NewPCG(1, 2))
		r.Shuffle(len(walk), func(i, j int) { walk[i], walk[j] = walk[j], walk[i] })
	}
	return walk
}

// BenchmarkStore measures Evaluate of one limit per request: on one key, and
// for the token bucket on 100k keys, each goroutine walking the keys from
// its own starting point.
func BenchmarkStore(b *testing.B) {
	ctx := context.Background()
	policies := benchPolicies()
	for _, alg := range ratelimit.Algorithms {
		b.Run(string(alg)+"/1key", func(b *testing.B) {
			s := newBenchStore(b)
			p := policies[alg]
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				reqs := []ratelimit.Request{{Key: "bench:one", Policy: p}}
				out := make([]ratelimit.Decision, 1)
				for pb.Next() {
					if _, err := s.Evaluate(ctx, reqs, out); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
	for _, order := range benchOrders {
		b.Run("token_bucket/100k_keys/"+order, func(b *testing.B) {
			benchStoreKeys(b, policies[ratelimit.TokenBucket], order)
		})
	}
}

// benchStoreKeys decides p on benchKeys keys, visited in order (see
// benchOrders), each goroutine walking them from its own starting point.
// Every key is tracked before timing, with an hour's worth of tokens taken so
// that its TTL outlives the benchmark even if a key waits long between two
// visits.
func benchStoreKeys(b *testing.B, p *ratelimit.Policy, order string) {
	ctx := context.Background()
	s := newBenchStore(b)
	keys := benchKeyList(benchKeys)
	out := make([]ratelimit.Decision, 1)
	for _, k := range keys {
		if _, err := s.Evaluate(ctx, []ratelimit.Request{{Key: k, Policy: p, Cost: 3600}}, out); err != nil {
			b.Fatal(err)
		}
	}
	walk := benchWalk(keys, order)
	var start atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(start.Add(7919)) % len(walk)
		reqs := []ratelimit.Request{{Policy: p}}
		out := make([]ratelimit.Decision, 1)
		for pb.Next() {
			reqs[0].Key = walk[i]
			if i++; i == len(walk) {
				i = 0
			}
			if _, err := s.Evaluate(ctx, reqs, out); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkXTimeRate is the baseline for one key: x/time/rate's Allow on one
// limiter with the token bucket's rate and burst.
func BenchmarkXTimeRate(b *testing.B) {
	b.Run("1key", func(b *testing.B) {
		l := rate.NewLimiter(benchRate, benchCapacity)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				l.Allow()
			}
		})
	})
}

// BenchmarkXTimeRateMutexMap is the baseline for many keys: a map of
// x/time/rate limiters behind one mutex, the simplest keyed limiter, visited
// in the same orders as the store (see benchOrders).
func BenchmarkXTimeRateMutexMap(b *testing.B) {
	for _, order := range benchOrders {
		b.Run("100k_keys/"+order, func(b *testing.B) {
			var mu sync.Mutex
			limiters := make(map[string]*rate.Limiter)
			get := func(key string) *rate.Limiter {
				mu.Lock()
				defer mu.Unlock()
				l := limiters[key]
				if l == nil {
					l = rate.NewLimiter(benchRate, benchCapacity)
					limiters[key] = l
				}
				return l
			}
			keys := benchKeyList(benchKeys)
			for _, k := range keys {
				get(k).Allow()
			}
			walk := benchWalk(keys, order)
			var start atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(start.Add(7919)) % len(walk)
				for pb.Next() {
					get(walk[i]).Allow()
					if i++; i == len(walk) {
						i = 0
					}
				}
			})
		})
	}
}

func newBenchStore(b *testing.B) *memory.Store {
	b.Helper()
	s, err := memory.New(memory.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
