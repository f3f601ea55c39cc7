package gateway

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/testkit"
	"github.com/sluice-gw/sluice/ratelimit/kit"
)

// TestKeyCapObservable: reaching store.memory.max_keys shows in
// sluice_store_keys and sluice_store_key_overflow_total, and in one WARN
// line, not one per request; after an hour without overflows the next one
// is logged again. For the memory store and for the local fallback of a
// Redis store (here unreachable, so the fallback decides).
func TestKeyCapObservable(t *testing.T) {
	deadRedis := testkit.ClosedAddr(t)
	const warning = "store.memory.max_keys reached"
	for _, tt := range []struct{ storeType, label string }{
		{config.StoreMemory, "memory"},
		{config.StoreRedis, "fallback"},
	} {
		t.Run(tt.label, func(t *testing.T) {
			rc := limitedRoute("hello", "/hello", "hi\n")
			rc.Limits[0].Key = httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}}
			cfg := testConfig(rc)
			cfg.Store.Type = tt.storeType
			cfg.Store.Redis = config.Redis{Mode: config.RedisStandalone, Addrs: []string{deadRedis}}
			cfg.Store.Memory.MaxKeys = 1 // one shard of one key: every key after the first overflows
			clock := kit.NewManualClock(time.Unix(1_764_000_000, 0))
			logs := &syncBuffer{}
			g, err := New(cfg, Deps{Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { g.Close() })
			serveTestEngine(t, g)
			users := 0
			send := func(n int) {
				for range n {
					users++
					req := httptest.NewRequest("GET", "/hello", nil)
					req.Header.Set("X-User", fmt.Sprint("u", users))
					g.ServeHTTP(httptest.NewRecorder(), req)
				}
			}
			check := func(when string, overflows, warnings int) {
				t.Helper()
				body := scrapeMetrics(t, g)
				for _, want := range []string{
					fmt.Sprintf(`sluice_store_keys{store=%q} 1`, tt.label),
					fmt.Sprintf(`sluice_store_key_overflow_total{store=%q} %d`, tt.label, overflows),
				} {
					if !strings.Contains(body, want+"\n") {
						t.Errorf("%s: /metrics lacks %q", when, want)
					}
				}
				if got := strings.Count(logs.String(), warning); got != warnings {
					t.Errorf("%s: %d lines say %q, want %d; logs:\n%s", when, got, warning, warnings, logs)
				}
			}
			send(1)
			check("one key, within the cap", 0, 0)
			send(5)
			check("five keys over the cap", 5, 1)
			clock.Advance(30 * time.Minute)
			send(1)
			check("another 30 minutes on", 6, 1)
			clock.Advance(keyCapQuiet)
			send(2)
			check("after an hour without overflows", 8, 2)
			if !strings.Contains(logs.String(), fmt.Sprintf("store=%s max_keys=1", tt.label)) {
				t.Errorf("the warning does not name the store and the cap:\n%s", logs)
			}
			// A closed store is no longer reported.
			g.Close()
			if body := scrapeMetrics(t, g); strings.Contains(body, "sluice_store_keys{") {
				t.Errorf("after Close, /metrics still reports a store's keys")
			}
		})
	}
}

// scrapeMetrics returns what g's /metrics serves.
func scrapeMetrics(t *testing.T, g *Gateway) string {
	t.Helper()
	rec := httptest.NewRecorder()
	metrics.Handler(g.Registry()).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
