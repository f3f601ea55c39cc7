package gateway

import (
	"context"
	"errors"
	"maps"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gw/sluice/gateway/admin"
)

// fakeShared is a shared overrides table in memory, as the Redis store
// keeps it, that can be made to fail.
type fakeShared struct {
	mu      sync.Mutex
	table   map[string]string
	version int64
	down    bool
	loads   int
}

var errDown = errors.New("store down")

func (f *fakeShared) Set(_ context.Context, field, value string) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return 0, errDown
	}
	f.table[field] = value
	f.version++
	return f.version, nil
}

func (f *fakeShared) Delete(_ context.Context, field string) (bool, int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return false, 0, errDown
	}
	_, ok := f.table[field]
	if ok {
		delete(f.table, field)
		f.version++
	}
	return ok, f.version, nil
}

func (f *fakeShared) Load(_ context.Context, since int64) (int64, map[string]string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.loads++
	if f.down {
		return 0, nil, false, errDown
	}
	if since == f.version {
		return f.version, nil, false, nil
	}
	return f.version, maps.Clone(f.table), true, nil
}

func TestOverridesFollowSharedTable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shared := &fakeShared{table: map[string]string{admin.Field("api", []string{"old"}): "vip"}, version: 7}
		a, b := newOverrides(shared, nil), newOverrides(shared, nil)
		defer a.close()
		defer b.close()
		// The first lookup reads the table, so existing overrides apply at once.
		if got := b.Lookup("api", []string{"old"}); got != "vip" {
			t.Fatalf("first lookup = %q, want vip", got)
		}
		if err := a.Set(context.Background(), "api", []string{"u1"}, "vip"); err != nil {
			t.Fatal(err)
		}
		if got := a.Lookup("api", []string{"u1"}); got != "vip" {
			t.Errorf("lookup on the instance that set it = %q, want vip at once", got)
		}
		if got := b.Lookup("api", []string{"u1"}); got != "" {
			t.Errorf("other instance before its poll = %q, want nothing yet", got)
		}
		time.Sleep(overridePoll)
		synctest.Wait()
		if got := b.Lookup("api", []string{"u1"}); got != "vip" {
			t.Errorf("other instance after one poll = %q, want vip", got)
		}
		// While the store is down the last table stays in force.
		shared.mu.Lock()
		shared.down = true
		shared.mu.Unlock()
		if err := a.Set(context.Background(), "api", []string{"u2"}, "vip"); !errors.Is(err, errDown) {
			t.Errorf("set with the store down = %v, want its error", err)
		}
		time.Sleep(3 * overridePoll)
		synctest.Wait()
		if got := b.Lookup("api", []string{"u1"}); got != "vip" {
			t.Errorf("with the store down = %q, want the last table kept", got)
		}
		shared.mu.Lock()
		shared.down = false
		shared.mu.Unlock()
		if existed, err := a.Remove(context.Background(), "api", []string{"u1"}); !existed || err != nil {
			t.Errorf("remove = %v, %v", existed, err)
		}
		time.Sleep(overridePoll)
		synctest.Wait()
		if got := b.Lookup("api", []string{"u1"}); got != "" {
			t.Errorf("after removal and a poll = %q, want none", got)
		}
		want := []admin.Override{{Route: "api", Key: []string{"old"}, Policy: "vip"}}
		if diff := cmp.Diff(want, b.List()); diff != "" {
			t.Errorf("list (-want +got):\n%s", diff)
		}
	})
}
