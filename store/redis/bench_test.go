package redis

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// BenchmarkEvaluate measures Evaluate of a token bucket on the package's
// standalone redis-server over loopback: "serial" is one EVALSHA round trip
// at a time (latency); "concurrency256" runs 256 callers over 100k keys,
// which rueidis pipelines automatically (throughput, reported as
// decisions/s).
func BenchmarkEvaluate(b *testing.B) {
	s, err := NewFromClient(standaloneRedis(b), Options{Prefix: "bench", Timeout: 5 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 10})
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = "user-" + strconv.Itoa(i)
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		out := make([]ratelimit.Decision, 1)
		req := []ratelimit.Request{{Policy: p}}
		for i := 0; b.Loop(); i++ {
			req[0].Key = keys[i%len(keys)]
			if _, err := s.Evaluate(context.Background(), req, out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("concurrency256", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(max(1, 256/runtime.GOMAXPROCS(0)))
		var next atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			out := make([]ratelimit.Decision, 1)
			req := []ratelimit.Request{{Policy: p}}
			for pb.Next() {
				req[0].Key = keys[next.Add(1)%int64(len(keys))]
				if _, err := s.Evaluate(context.Background(), req, out); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	})
}
