package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/ratelimit"
)

// BenchmarkBatchTwoLimits measures the Redis time of the gateway's common
// request, a per-user token bucket over 100 000 users and one global fixed
// window, decided in batches of 1, 12 and 32 such requests (mode 'b': the
// global key repeats), on a redis-server of its own. redis-µs/request is
// the script's time inside Redis (INFO commandstats) per request; ns/op
// is one batch's round trip. The limits never deny: the figure is the
// cost of deciding and committing.
func BenchmarkBatchTwoLimits(b *testing.B) {
	srv := redistest.NewServer(b, redistest.ServerOptions{})
	s, err := New(Options{Addrs: []string{srv.Addr()}, Prefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	user := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "per-user", Algorithm: ratelimit.TokenBucket, Capacity: 1_000_000_000, Rate: 1_000_000})
	global := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "global", Algorithm: ratelimit.FixedWindow, Limit: 1_000_000_000_000, Window: 3_600_000_000_000})
	c, err := s.client(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{1, 12, 32} {
		b.Run(fmt.Sprint("batch", n), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			reqs := make([][]ratelimit.Request, n)
			for i := range reqs {
				reqs[i] = []ratelimit.Request{{Policy: user, Cost: 1}, {Key: "global", Policy: global, Cost: 1}}
			}
			calls := func() (calls, usec int64) {
				info, err := srv.Info("commandstats")
				if err != nil {
					b.Fatal(err)
				}
				for _, f := range strings.Split(info["cmdstat_evalsha"], ",") {
					if v, ok := strings.CutPrefix(f, "calls="); ok {
						calls, _ = strconv.ParseInt(v, 10, 64)
					}
					if v, ok := strings.CutPrefix(f, "usec="); ok {
						usec, _ = strconv.ParseInt(v, 10, 64)
					}
				}
				return calls, usec
			}
			c0, u0 := calls()
			b.ResetTimer()
			for range b.N {
				now := s.now()
				bt := &batch{now: now, done: make(chan struct{})}
				bt.ctx, bt.cancel = context.WithTimeout(context.Background(), s.timeout)
				for _, r := range reqs {
					r[0].Key = strconv.Itoa(rng.IntN(100_000))
					m := &member{ctx: context.Background(), cl: s.newCall(modeEvaluate, now, r, nil), n: len(r)}
					bt.members = append(bt.members, m)
					bt.limits += m.n
				}
				s.send(c, bt)
				<-bt.done
				for _, m := range bt.members {
					if m.err != nil || !m.overall {
						b.Fatalf("batch of %d: %v, admitted %v", n, m.err, m.overall)
					}
				}
			}
			b.StopTimer()
			c1, u1 := calls()
			if c1-c0 < int64(b.N) {
				b.Fatalf("%d script calls for %d batches", c1-c0, b.N)
			}
			b.ReportMetric(float64(u1-u0)/float64(b.N*n), "redis-µs/request")
		})
	}
}
