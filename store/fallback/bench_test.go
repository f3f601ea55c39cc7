package fallback

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"
)

// BenchmarkEvaluate measures one decision over 10k keys, under RunParallel,
// with a memory store as primary: "primary" is that store alone, "allow" the
// Store with nothing to record, "inprocess" the route's view of a Store
// marked InProcess (how the gateway holds a memory store), "local" the Store recording each admission on
// the local store (the price of adding no budget on a switch), "open" the
// fallback decision with the breaker open.
func BenchmarkEvaluate(b *testing.B) {
	keys := make([]string, 10_000)
	for i := range keys {
		keys[i] = fmt.Sprint("bench-key-", i)
	}
	p := ratelimit.MustPolicy(ratelimit.PolicyConfig{Name: "b", Algorithm: ratelimit.TokenBucket, Capacity: 1 << 40, Rate: 1e6})
	cases := []struct {
		name  string
		store func() ratelimit.Store
	}{
		{"primary", func() ratelimit.Store { return newMemory(b, nil) }},
		{"allow", func() ratelimit.Store { return mustNew(b, Options{Primary: newMemory(b, nil), Mode: Allow}) }},
		{"inprocess", func() ratelimit.Store {
			return mustNew(b, Options{Primary: newMemory(b, nil), InProcess: true}).Observed(func(context.Context, Mode) {})
		}},
		{"local", func() ratelimit.Store {
			return mustNew(b, Options{Primary: newMemory(b, nil), Local: newMemory(b, nil)})
		}},
		{"open", func() ratelimit.Store {
			f := &fakeStore{inner: newMemory(b, nil)}
			s := mustNew(b, Options{Primary: f, Local: newMemory(b, nil)})
			f.set(failing)
			var out [1]ratelimit.Decision
			for !s.Active() {
				s.Evaluate(context.Background(), []ratelimit.Request{{Key: "trip", Policy: p}}, out[:])
			}
			return s
		}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			s := c.store()
			var seq atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := int(seq.Add(1)) * 7919
				reqs := make([]ratelimit.Request, 1)
				out := make([]ratelimit.Decision, 1)
				for pb.Next() {
					i++
					reqs[0] = ratelimit.Request{Key: keys[i%len(keys)], Policy: p}
					if _, err := s.Evaluate(context.Background(), reqs, out); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

func mustNew(b *testing.B, o Options) *Store {
	s, err := New(o)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
