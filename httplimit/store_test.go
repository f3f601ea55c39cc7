package httplimit

import (
	"context"
	"sync"
	"testing"

	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// testStore is the memory store, counting calls, recording the state keys it
// is asked about, and failing on demand.
type testStore struct {
	*memory.Store
	mu    sync.Mutex
	err   error // returned by Evaluate when set
	calls int
	seen  map[string]bool
}

func newTestStore(t testing.TB, clock ratelimit.Clock) *testStore {
	t.Helper()
	s, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &testStore{Store: s, seen: map[string]bool{}}
}

func (s *testStore) Evaluate(ctx context.Context, reqs []ratelimit.Request, out []ratelimit.Decision) (bool, error) {
	s.mu.Lock()
	s.calls++
	err := s.err
	for _, q := range reqs {
		s.seen[q.Key] = true
	}
	s.mu.Unlock()
	if err != nil {
		return false, err
	}
	return s.Store.Evaluate(ctx, reqs, out)
}

// keys returns the state keys evaluated so far.
func (s *testStore) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ks []string
	for k := range s.seen {
		ks = append(ks, k)
	}
	return ks
}
