package memory

import (
	"runtime"
	"strconv"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"

	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// longKey returns a fresh key of size bytes that starts with i, so that
// the only reference to it is the caller's: a store that keeps it makes the
// heap grow by its size.
func longKey(i, size int) string {
	b := make([]byte, 0, size)
	b = strconv.AppendInt(b, int64(i), 10)
	for len(b) < size {
		b = append(b, 'k')
	}
	return string(b)
}

// TestLongKeysFixedBytes tracks 20,000 distinct 8 KB keys and bounds the
// heap they leave behind at 20 MB: the store keeps a fixed-size digest per key, so what
// a key costs does not depend on its length. Every key stays tracked, and
// each still has a budget of its own.
func TestLongKeysFixedBytes(t *testing.T) {
	const (
		keys    = 20_000
		keySize = 8 << 10
		bound   = 20 << 20
	)
	p := mustPolicy(t, ratelimit.PolicyConfig{Name: "tb", Algorithm: ratelimit.TokenBucket, Capacity: 2, Rate: 1})
	s := newTestStore(t, Options{Clock: kit.NewManualClock(t0)})
	base := heapInUse()
	for i := range keys {
		evaluate(t, s, ratelimit.Request{Key: longKey(i, keySize), Policy: p})
	}
	grown := int64(heapInUse()) - int64(base)
	runtime.KeepAlive(s)
	if st := s.Stats(); st.Keys != keys {
		t.Fatalf("%d keys tracked, want %d", st.Keys, keys)
	}
	t.Logf("%d distinct %d-byte keys: heap grew by %.1f MiB", keys, keySize, float64(grown)/(1<<20))
	if grown > bound {
		t.Errorf("heap grew by %.1f MiB for %d keys of %d bytes, want < %d MiB", float64(grown)/(1<<20), keys, keySize, bound>>20)
	}
	// Each key is its own: a second request takes the last token of its
	// own bucket, a third is denied, and a key that differs only in its
	// last byte is untouched.
	k := longKey(7, keySize)
	if ok, _ := evaluate(t, s, ratelimit.Request{Key: k, Policy: p}); !ok {
		t.Errorf("second request of key 7 denied, want its second token")
	}
	if ok, _ := evaluate(t, s, ratelimit.Request{Key: k, Policy: p}); ok {
		t.Errorf("third request of key 7 admitted, want denied (capacity 2)")
	}
	other := k[:keySize-1] + "x"
	if d := peek(t, s, ratelimit.Request{Key: other, Policy: p})[0]; d.Remaining != 2 || !d.Allowed {
		t.Errorf("Peek of a key that differs in its last byte = %+v, want a full budget", d)
	}
}

// TestDigestSeededPerStore: each store draws its own seeds, so a digest
// computed against one store (or one process) says nothing about another's.
func TestDigestSeededPerStore(t *testing.T) {
	a := newTestStore(t, Options{})
	b := newTestStore(t, Options{})
	if da, db := a.digest("user-1"), b.digest("user-1"); da == db || da.hash == db.hash || da.check == db.check {
		t.Errorf("two stores digest one key as %+v and %+v, want unrelated digests", da, db)
	}
	if d := a.digest("user-1"); d.hash == d.check {
		t.Errorf("digest %+v: its two halves are equal, want two seeds", d)
	}
}
