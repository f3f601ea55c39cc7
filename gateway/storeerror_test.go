package gateway

import (
	"context"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/ratelimit"
)

// downStore fails every call as a refused connection does.
type downStore struct{}

var errRefused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

func (downStore) Evaluate(context.Context, []ratelimit.Request, []ratelimit.Decision) (bool, error) {
	return false, errRefused
}
func (downStore) Peek(context.Context, []ratelimit.Request, []ratelimit.Decision) error {
	return errRefused
}
func (downStore) Reset(context.Context, []ratelimit.Request) error { return errRefused }

func TestStoreDown(t *testing.T) {
	for _, tt := range []struct {
		mode          config.OnError
		status, ready int
		fallback      string
	}{
		{config.OnErrorDeny, 503, 503, `sluice_fallback_decisions_total{mode="deny",route="hello"} 1`},
		{config.OnErrorAllow, 200, 200, `sluice_fallback_decisions_total{mode="allow",route="hello"} 1`},
	} {
		t.Run(string(tt.mode), func(t *testing.T) {
			cfg := testConfig(limitedRoute("hello", "/hello", "hi\n"))
			cfg.Store.OnError = tt.mode
			g, err := New(cfg, Deps{Store: downStore{}})
			if err != nil {
				t.Fatal(err)
			}
			_, base, admin := startServerURLs(t, g)
			code, body, h := get(t, base+"/hello")
			if code != tt.status {
				t.Errorf("status with the store down, on_error %s = %d %s, want %d", tt.mode, code, body, tt.status)
			}
			for _, name := range quotaHeaders {
				if v := h.Values(name); len(v) > 0 {
					t.Errorf("on_error %s with the store down sends %s: %q; want no quota headers", tt.mode, name, v)
				}
			}
			if tt.status == 503 && (h.Get("Retry-After") != "1" || !strings.Contains(body, `"error":"Service Unavailable"`)) {
				t.Errorf("503 answer: Retry-After %q body %s", h.Get("Retry-After"), body)
			}
			if code, _, _ := get(t, admin+"/readyz"); code != tt.ready {
				t.Errorf("/readyz with the store down, on_error %s = %d, want %d", tt.mode, code, tt.ready)
			}
			_, metrics, _ := get(t, admin+"/metrics")
			for _, want := range []string{`sluice_store_errors_total{kind="connection"} 1`, `sluice_store_duration_seconds_count 1`, tt.fallback} {
				if !strings.Contains(metrics, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		})
	}
}

// TestInProcessStoreDownLocal: on_error local over a store that has no
// store more local (an injected or memory store) answers 503 without
// counting a fallback decision, is not ready, and counts every failure: an
// in-process store has no breaker to stop asking it.
func TestInProcessStoreDownLocal(t *testing.T) {
	cfg := testConfig(limitedRoute("hello", "/hello", "hi\n"))
	cfg.Store.OnError = config.OnErrorLocal
	g, err := New(cfg, Deps{Store: downStore{}})
	if err != nil {
		t.Fatal(err)
	}
	_, base, admin := startServerURLs(t, g)
	for i := range 8 {
		if code, body, h := get(t, base+"/hello"); code != 503 || h.Get("Retry-After") != "1" {
			t.Fatalf("request %d with the store down, on_error local = %d %s (Retry-After %q), want 503 with Retry-After 1", i+1, code, body, h.Get("Retry-After"))
		}
	}
	if code, _, _ := get(t, admin+"/readyz"); code != 503 {
		t.Errorf("/readyz with the store down, on_error local = %d, want 503", code)
	}
	_, metrics, _ := get(t, admin+"/metrics")
	if !strings.Contains(metrics, `sluice_store_errors_total{kind="connection"} 8`) {
		t.Errorf("/metrics lacks 8 connection errors")
	}
	if strings.Contains(metrics, `sluice_fallback_decisions_total{`) {
		t.Errorf("/metrics counts a fallback decision; on_error local with no local store decides nothing")
	}
}

// TestFallbackCountedPerRoute: each route's decisions made without the
// store are counted under its own id, the route being named to the store's
// hook when the route is built.
func TestFallbackCountedPerRoute(t *testing.T) {
	cfg := testConfig(limitedRoute("a", "/a", "a\n"), limitedRoute("b", "/b", "b\n"))
	cfg.Store.OnError = config.OnErrorAllow
	g, err := New(cfg, Deps{Store: downStore{}})
	if err != nil {
		t.Fatal(err)
	}
	_, base, admin := startServerURLs(t, g)
	for _, path := range []string{"/a", "/a", "/b"} {
		if code, body, _ := get(t, base+path); code != 200 {
			t.Fatalf("GET %s with the store down, on_error allow = %d %s, want 200", path, code, body)
		}
	}
	_, metrics, _ := get(t, admin+"/metrics")
	for _, want := range []string{`sluice_fallback_decisions_total{mode="allow",route="a"} 2`, `sluice_fallback_decisions_total{mode="allow",route="b"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
