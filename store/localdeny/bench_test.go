package localdeny

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// verdictStore answers every request at once, with no state: it denies the
// keys in deny (for an hour) and admits the others. It stands for the
// store below, so that the benchmarks time this package alone.
type verdictStore struct{ deny map[string]bool }

func (v verdictStore) Evaluate(_ context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	ok := true
	for i, r := range reqs {
		if v.deny[r.Key] {
			out[i] = ratelimit.Decision{Limit: 1, RetryAfter: time.Hour, Reset: time.Hour, Next: time.Hour}
			ok = false
		} else {
			out[i] = ratelimit.Decision{Allowed: true, Limit: 1, Remaining: 1}
		}
	}
	return ok, nil
}

func (verdictStore) Peek(context.Context, []ratelimit.Request, []ratelimit.Decision) error {
	return nil
}
func (verdictStore) Reset(context.Context, []ratelimit.Request) error { return nil }

// BenchmarkEvaluate times one single-limit request through a Store:
//
//   - hit: the key is remembered denied and answered here;
//   - miss-empty: nothing is remembered, the store below admits;
//   - miss-busy: 50,000 other keys are remembered, this one is not;
//   - direct: the store below alone, for reference.
//
// Each runs on one goroutine and on GOMAXPROCS (parallel, keys spread over
// 1024 so that shards are shared as in a gateway).
func BenchmarkEvaluate(b *testing.B) {
	deny := map[string]bool{}
	for i := range 1024 {
		deny["abuser-"+strconv.Itoa(i)] = true
	}
	busy := map[string]bool{}
	for i := range 50_000 {
		busy["other-"+strconv.Itoa(i)] = true
	}
	keys := func(prefix string) []string {
		ks := make([]string, 1024)
		for i := range ks {
			ks[i] = prefix + strconv.Itoa(i)
		}
		return ks
	}
	newStore := func(b *testing.B, inner ratelimit.Store, warm []string) ratelimit.Store {
		s, err := New(Options{Store: inner})
		if err != nil {
			b.Fatal(err)
		}
		out := make([]ratelimit.Decision, 1)
		for _, k := range warm {
			s.Evaluate(context.Background(), []ratelimit.Request{{Key: k, Policy: tight}}, out)
		}
		return s
	}
	cases := []struct {
		name  string
		store func(b *testing.B) ratelimit.Store
		keys  []string
	}{
		{"hit", func(b *testing.B) ratelimit.Store {
			return newStore(b, verdictStore{deny}, keys("abuser-"))
		}, keys("abuser-")},
		{"miss-empty", func(b *testing.B) ratelimit.Store { return newStore(b, verdictStore{}, nil) }, keys("user-")},
		{"miss-busy", func(b *testing.B) ratelimit.Store {
			return newStore(b, verdictStore{busy}, keys("other-")[:0:0])
		}, keys("user-")},
		{"direct", func(b *testing.B) ratelimit.Store { return verdictStore{} }, keys("user-")},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s := c.store(b)
			if c.name == "miss-busy" {
				out := make([]ratelimit.Decision, 1)
				for k := range busy {
					s.Evaluate(context.Background(), []ratelimit.Request{{Key: k, Policy: tight}}, out)
				}
			}
			ctx := context.Background()
			b.Run("serial", func(b *testing.B) {
				reqs := []ratelimit.Request{{Key: c.keys[0], Policy: tight}}
				out := make([]ratelimit.Decision, 1)
				b.ReportAllocs()
				for b.Loop() {
					s.Evaluate(ctx, reqs, out)
				}
			})
			b.Run("parallel", func(b *testing.B) {
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					reqs := []ratelimit.Request{{Policy: tight}}
					out := make([]ratelimit.Decision, 1)
					i := 0
					for pb.Next() {
						reqs[0].Key = c.keys[i%len(c.keys)]
						i++
						s.Evaluate(ctx, reqs, out)
					}
				})
			})
		})
	}
}
