package fallback

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sluice-gw/sluice/internal/testdiff"
	"github.com/sluice-gw/sluice/ratelimit"
)

// TestInProcess: an in-process primary is called for every request, with
// no breaker, and each failure is decided by the mode: Allow admits
// uncounted, Deny and Local (which has nothing more local) fail with
// ErrUnavailable; only Allow and Deny count fallback decisions. Ready
// follows Ping in Deny and Local modes, and Peek and Reset reach the
// primary unchanged.
func TestInProcess(t *testing.T) {
	const n = 3 * DefaultConsecutiveFailures
	tests := []struct {
		mode      Mode
		wantOK    bool
		wantErr   error
		falls     map[Mode]int
		wantReady bool
	}{
		{Allow, true, nil, map[Mode]int{Allow: n}, true},
		{Deny, false, ErrUnavailable, map[Mode]int{Deny: n}, false},
		{Local, false, ErrUnavailable, map[Mode]int{}, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			e := newEnv(t, func(o *Options) {
				o.Mode, o.Local, o.InProcess = tt.mode, nil, true
				o.Ping = o.Primary.(*fakeStore).ping
			})
			if _, ok := e.allow("k", bucket); !ok {
				t.Fatal("first request with the primary up was denied")
			}
			e.primary.set(failing)
			for i := range n {
				var out [1]ratelimit.Decision
				ok, err := e.s.Evaluate(context.Background(), []ratelimit.Request{{Key: fmt.Sprint("k", i), Policy: bucket}}, out[:])
				if ok != tt.wantOK || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
					t.Fatalf("request %d: Evaluate = %v, %v; want %v, %v", i, ok, err, tt.wantOK, tt.wantErr)
				}
				if ok && !out[0].Uncounted {
					t.Errorf("request %d: decision %+v, want an uncounted admission", i, out[0])
				}
			}
			if calls, _ := e.primary.stats(); calls != n+1 {
				t.Errorf("primary calls = %d, want %d: an in-process primary is asked every time", calls, n+1)
			}
			if e.s.Active() {
				t.Error("Active = true, want false: an in-process primary has no breaker")
			}
			errs, falls, _ := e.hooks.snapshot()
			if diff := testdiff.Diff(map[string]int{"other": n}, errs); diff != "" {
				t.Errorf("OnStoreError (-want +got):\n%s", diff)
			}
			if diff := testdiff.Diff(tt.falls, falls); diff != "" {
				t.Errorf("OnFallback (-want +got):\n%s", diff)
			}
			if got := e.s.Ready(context.Background()); got != tt.wantReady {
				t.Errorf("Ready with the primary failing = %v, want %v", got, tt.wantReady)
			}
			var out [1]ratelimit.Decision
			if err := e.s.Peek(context.Background(), []ratelimit.Request{{Key: "k", Policy: bucket}}, out[:]); !errors.Is(err, errRefused) {
				t.Errorf("Peek with the primary failing = %v, want its error", err)
			}
			e.primary.set(up)
			if !e.s.Ready(context.Background()) {
				t.Error("Ready with the primary up = false, want true")
			}
		})
	}
}

// TestObserved: a view from Observed reports its own fallback decisions to
// its hook, and every view's to OnFallback; the views share one breaker.
func TestObserved(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Mode = Allow })
	seen := map[string]int{}
	a := e.s.Observed(func(_ context.Context, m Mode) { seen["a "+string(m)]++ })
	b := e.s.Observed(func(_ context.Context, m Mode) { seen["b "+string(m)]++ })
	e.primary.set(failing)
	var out [1]ratelimit.Decision
	for i, s := range []ratelimit.Store{a, a, b, e.s} {
		if ok, err := s.Evaluate(context.Background(), []ratelimit.Request{{Key: "k", Policy: bucket}}, out[:]); !ok || err != nil {
			t.Fatalf("request %d: Evaluate = %v, %v; want an admission", i, ok, err)
		}
	}
	if diff := testdiff.Diff(map[string]int{"a allow": 2, "b allow": 1}, seen); diff != "" {
		t.Errorf("views' hooks (-want +got):\n%s", diff)
	}
	if _, falls, _ := e.hooks.snapshot(); falls[Allow] != 4 {
		t.Errorf("OnFallback counted %d, want 4", falls[Allow])
	}
}
