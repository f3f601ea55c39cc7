package memory

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/sluice-gw/sluice/ratelimit"
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

func newBenchStore(b *testing.B) *Store {
	b.Helper()
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
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
	b.Run("token_bucket/100k_keys", func(b *testing.B) {
		s := newBenchStore(b)
		p := policies[ratelimit.TokenBucket]
		keys := benchKeyList(benchKeys)
		out := make([]ratelimit.Decision, 1)
		// Every key is tracked before timing, with an hour's worth of tokens
		// taken so that its TTL outlives the benchmark even if a key waits long
		// between two visits.
		for _, k := range keys {
			if _, err := s.Evaluate(ctx, []ratelimit.Request{{Key: k, Policy: p, Cost: 3600}}, out); err != nil {
				b.Fatal(err)
			}
		}
		var start atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(7919)) % len(keys)
			reqs := []ratelimit.Request{{Policy: p}}
			out := make([]ratelimit.Decision, 1)
			for pb.Next() {
				reqs[0].Key = keys[i]
				if i++; i == len(keys) {
					i = 0
				}
				if _, err := s.Evaluate(ctx, reqs, out); err != nil {
					b.Error(err)
					return
				}
			}
		})
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
// x/time/rate limiters behind one mutex, the simplest keyed limiter.
func BenchmarkXTimeRateMutexMap(b *testing.B) {
	b.Run("100k_keys", func(b *testing.B) {
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
		var start atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			i := int(start.Add(7919)) % len(keys)
			for pb.Next() {
				get(keys[i]).Allow()
				if i++; i == len(keys) {
					i = 0
				}
			}
		})
	})
}
