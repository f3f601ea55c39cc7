package ratelimit

import (
	"testing"
	"time"
)

// BenchmarkStepAt measures one algorithm step in steady state: each
// iteration is 1µs after the previous one and feeds the returned state to the
// next, as a store does. The policies admit about one request per µs, so most
// steps take the admitting path that builds a new state. The sliding log
// keeps a bounded log of 64 entries; appending to it reallocates now and then
// because the step drops entries from the front (a store moves them back to
// reuse the array; this benchmark does not).
func BenchmarkStepAt(b *testing.B) {
	policies := []PolicyConfig{
		{Algorithm: TokenBucket, Capacity: 100, Rate: 1e6},
		{Algorithm: LeakyBucket, Capacity: 100, Rate: 1e6},
		{Algorithm: LeakyBucket, Capacity: 100, Rate: 1e6, Mode: Shape, MaxDelay: time.Millisecond},
		{Algorithm: GCRA, Burst: 100, Rate: 1e6},
		{Algorithm: FixedWindow, Limit: 1000, Window: time.Millisecond},
		{Algorithm: SlidingWindow, Limit: 1000, Window: time.Millisecond},
		{Algorithm: SlidingLog, Limit: 64, Window: 64 * time.Microsecond},
	}
	for _, c := range policies {
		p := MustPolicy(c)
		name := string(c.Algorithm)
		if c.Mode == Shape {
			name += "_shape"
		}
		b.Run(name, func(b *testing.B) {
			var s State
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
			allowed := 0
			b.ReportAllocs()
			for b.Loop() {
				next, d := StepAt(p, s, now, 1)
				if d.Allowed {
					s = next
					allowed++
				}
				now++
			}
			if allowed == 0 {
				b.Fatal("no step admitted; the benchmark measures the wrong path")
			}
		})
	}
}
