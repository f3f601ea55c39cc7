package memory

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// TestBytesPerKey measures the heap the store holds per tracked key at 100k
// token-bucket keys, the benchmark's population, and bounds it. The keys'
// own strings are made before the baseline, so only the store's tables count.
func TestBytesPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("builds 100k keys")
	}
	const keys = 100_000
	names := make([]string, keys)
	for i := range names {
		names[i] = "bench:user:" + strconv.Itoa(i)
	}
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 100, Rate: 1})
	base := heapInUse()
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
	for _, k := range names {
		evaluate(t, s, ratelimit.Request{Key: k, Policy: p})
	}
	grown := int64(heapInUse()) - int64(base)
	runtime.KeepAlive(names) // or its array, freed, would count against the store
	if st := s.Stats(); st.Keys != keys {
		t.Fatalf("%d keys tracked, want %d", st.Keys, keys)
	}
	perKey := float64(grown) / keys
	t.Logf("%d token-bucket keys in %d shards: heap grew by %.1f MiB, %.0f B per key", keys, len(s.shards), float64(grown)/(1<<20), perKey)
	// 390 keys a shard fill 512 slots of 64 B to 0.76: about 84 B per key
	// (the Go map of pointers to entries the table replaced took 115 B).
	if perKey > 100 {
		t.Errorf("%.0f B per tracked key, want ≤ 100", perKey)
	}
}
