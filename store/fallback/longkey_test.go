package fallback

import (
	"context"
	"runtime"
	"strconv"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"
)

// admitAll is a primary that admits everything and keeps nothing, so that
// only the fallback's own memory shows in the heap.
type admitAll struct{ failing bool }

func (a *admitAll) Evaluate(_ context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	if a.failing {
		return false, errRefused
	}
	for i := range reqs {
		m := reqs[i].Policy.Max()
		out[i] = ratelimit.Decision{Allowed: true, Limit: m, Remaining: m - 1}
	}
	return true, nil
}

func (a *admitAll) Peek(context.Context, []ratelimit.Request, []ratelimit.Decision) error { return nil }
func (a *admitAll) Reset(context.Context, []ratelimit.Request) error                      { return nil }

// heapInUse returns the live heap after two collections.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestLongKeysFixedBytes sends 20,000 distinct 8 KB keys through the
// fallback: while the primary is healthy the Local store mirrors
// every key, and while it fails the Local store decides and each admitted
// key is remembered as owing. Neither may keep the keys' bytes: the heap
// grows by less than 20 MB.
func TestLongKeysFixedBytes(t *testing.T) {
	const (
		keys    = 20_000
		keySize = 8 << 10
		bound   = 20 << 20
	)
	for _, tc := range []struct {
		name    string
		failing bool
	}{{"healthy primary, mirrored", false}, {"failing primary, owing", true}} {
		t.Run(tc.name, func(t *testing.T) {
			primary := &admitAll{failing: tc.failing}
			s, err := New(Options{Primary: primary, Local: newMemory(t, nil), ConsecutiveFailures: 1 << 30})
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, keySize)
			for i := range buf {
				buf[i] = 'k'
			}
			reqs := []ratelimit.Request{{Policy: bucket}}
			out := make([]ratelimit.Decision, 1)
			base := heapInUse()
			for i := range keys {
				copy(buf, strconv.Itoa(i)+":")
				reqs[0].Key = string(buf) // fresh: only a store that keeps it keeps it alive
				if ok, err := s.Evaluate(context.Background(), reqs, out); err != nil || !ok {
					t.Fatalf("Evaluate(key %d) = %v, %v; want admitted", i, ok, err)
				}
			}
			reqs[0].Key = ""
			grown := int64(heapInUse()) - int64(base)
			runtime.KeepAlive(s)
			t.Logf("%d distinct %d-byte keys: heap grew by %.1f MiB; %d owing", keys, keySize, float64(grown)/(1<<20), s.debts.len())
			if tc.failing && s.debts.len() != keys {
				t.Errorf("%d keys owing, want %d", s.debts.len(), keys)
			}
			if grown > bound {
				t.Errorf("heap grew by %.1f MiB for %d keys of %d bytes, want < %d MiB", float64(grown)/(1<<20), keys, keySize, bound>>20)
			}
		})
	}
}
