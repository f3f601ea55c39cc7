package memory

import "testing"

// The benchmarks of Evaluate on one and many keys, and their x/time/rate
// baselines, are in the bench module (bench/baseline), which may depend on
// x/time/rate; this file keeps what needs the store's internals.

func newBenchStore(b *testing.B) *Store {
	b.Helper()
	s, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkDecisionFloor measures what every decision on the store pays
// before it looks at a key: taking and releasing a shard's lock around a
// read of the store's clock. No lookup, step or cache miss is timed, so no
// implementation of this store (one lock and one clock read per decision)
// decides faster.
func BenchmarkDecisionFloor(b *testing.B) {
	s := newBenchStore(b)
	sh := &s.shards[0]
	var sink int64
	b.ReportAllocs()
	for b.Loop() {
		sh.mu.Lock()
		sink = s.nowMicros()
		sh.mu.Unlock()
	}
	if sink <= 0 {
		b.Fatal("the store's clock read no time")
	}
}
