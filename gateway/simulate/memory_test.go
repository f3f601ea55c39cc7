package simulate

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

// BenchmarkMemoryPerKey measures the heap the memory store holds per key,
// for each algorithm, after each of 100 000 keys has made `requests`
// requests (10 000 keys for the long sliding log): the "memory per key"
// column of docs/algorithms.md. The key strings are made beforehand and not
// counted; the store keeps the caller's string, so add the key's length.
//
//	go test ./gateway/simulate -run '^$' -bench MemoryPerKey -benchtime 1x
func BenchmarkMemoryPerKey(b *testing.B) {
	const keys = 100_000
	specs, err := CompareSpecs(100, time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	for _, sp := range specs {
		for _, requests := range []int{1, 100} {
			if requests > 1 && sp.Policy.Algorithm() != ratelimit.SlidingLog {
				continue // only the log grows with the requests it holds
			}
			b.Run(fmt.Sprintf("%s/requests=%d", sp.Label, requests), func(b *testing.B) {
				for range b.N {
					b.ReportMetric(heapPerKey(b, sp.Policy, keys, requests), "B/key")
				}
			})
		}
	}
}

// heapPerKey fills a fresh memory store and returns the heap growth per key.
func heapPerKey(b *testing.B, p *ratelimit.Policy, keys, requests int) float64 {
	if requests > 1 {
		keys /= 10 // a long log makes every step slower
	}
	clock := kit.NewManualClock(Epoch)
	names := make([]string, keys)
	for i := range names {
		names[i] = fmt.Sprintf("user:%011d", i)
	}
	st, err := memory.New(memory.Options{Clock: clock, SweepInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	before := heapInUse() // the names and the empty store are not counted
	reqs, out := make([]ratelimit.Request, 1), make([]ratelimit.Decision, 1)
	for r := range requests {
		clock.Set(Epoch.Add(time.Duration(r) * time.Millisecond))
		for _, k := range names {
			reqs[0] = ratelimit.Request{Key: k, Policy: p}
			if _, err := st.Evaluate(context.Background(), reqs, out); err != nil {
				b.Fatal(err)
			}
		}
	}
	grown := heapInUse() - before
	runtime.KeepAlive(st)
	runtime.KeepAlive(names) // or they, freed, would count against the store
	return float64(grown) / float64(keys)
}

func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
