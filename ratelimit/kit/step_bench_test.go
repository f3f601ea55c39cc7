package kit

import (
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"
)

// BenchmarkStepAt measures one algorithm step in steady state: each
// iteration is 1µs after the previous one and steps the same state in place,
// as a store does. The policies admit about one request per µs, so most
// steps take the admitting path that builds a new state. The sliding log
// keeps a bounded log of 64 entries; appending to it reallocates now and then
// because the step drops entries from the front (a store moves them back to
// reuse the array; this benchmark does not).
func BenchmarkStepAt(b *testing.B) {
	policies := []ratelimit.PolicyConfig{
		{Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 1e6},
		{Algorithm: ratelimit.LeakyBucket, Capacity: 100, Rate: 1e6},
		{Algorithm: ratelimit.LeakyBucket, Capacity: 100, Rate: 1e6, Mode: ratelimit.Shape, MaxDelay: time.Millisecond},
		{Algorithm: ratelimit.GCRA, Burst: 100, Rate: 1e6},
		{Algorithm: ratelimit.FixedWindow, Limit: 1000, Window: time.Millisecond},
		{Algorithm: ratelimit.SlidingWindow, Limit: 1000, Window: time.Millisecond},
		{Algorithm: ratelimit.SlidingLog, Limit: 64, Window: 64 * time.Microsecond},
	}
	for _, c := range policies {
		p := ratelimit.MustPolicy(c)
		name := string(c.Algorithm)
		if c.Mode == ratelimit.Shape {
			name += "_shape"
		}
		b.Run(name, func(b *testing.B) {
			var (
				s State
				d ratelimit.Decision
			)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMicro()
			allowed := 0
			b.ReportAllocs()
			for b.Loop() {
				StepAt(p, &s, now, 1, &d)
				if d.Allowed {
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
