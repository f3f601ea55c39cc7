package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/testkit"
	"github.com/sluice-gw/sluice/store/memory"
)

// The config's default must be the store's, or a config that leaves
// store.memory.max_keys out would not mean "the store's default".
func TestMemoryMaxKeysDefault(t *testing.T) {
	if config.DefaultMemoryMaxKeys != memory.DefaultMaxKeys {
		t.Errorf("config.DefaultMemoryMaxKeys = %d, memory.DefaultMaxKeys = %d", config.DefaultMemoryMaxKeys, memory.DefaultMaxKeys)
	}
}

// TestMemoryMaxKeys: store.memory.max_keys reaches the memory store, and the
// local fallback of a Redis store. With a cap of 1, the first key is tracked
// and every later key shares one overflow budget ("three": 3 per hour), so
// a third key is denied on its first request; without the cap each key has
// its own budget.
func TestMemoryMaxKeys(t *testing.T) {
	// A Redis address that refuses connections: every decision falls back
	// to the local store (on_error local).
	deadRedis := testkit.ClosedAddr(t)

	for _, tt := range []struct {
		name      string
		storeType string
		maxKeys   int
		third     int // status of the third key's first request
	}{
		{"memory default", config.StoreMemory, 0, 200},
		{"memory max_keys 1", config.StoreMemory, 1, 429},
		{"redis local fallback default", config.StoreRedis, 0, 200},
		{"redis local fallback max_keys 1", config.StoreRedis, 1, 429},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rc := limitedRoute("hello", "/hello", "hi\n")
			rc.Limits[0].Key = httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}}
			cfg := testConfig(rc)
			cfg.Store.Type = tt.storeType
			cfg.Store.Redis = config.Redis{Mode: config.RedisStandalone, Addrs: []string{deadRedis}}
			cfg.Store.Memory.MaxKeys = tt.maxKeys
			g := newTestGateway(t, cfg)
			send := func(user string) int {
				req := httptest.NewRequest("GET", "/hello", nil)
				req.Header.Set("X-User", user)
				rec := httptest.NewRecorder()
				g.ServeHTTP(rec, req)
				return rec.Code
			}
			for i, want := range []int{200, 200, 200, 429} {
				if got := send("u1"); got != want {
					t.Fatalf("request %d of u1 = %d, want %d", i+1, got, want)
				}
			}
			for i := range 3 {
				if got := send("u2"); got != http.StatusOK {
					t.Fatalf("request %d of u2 = %d, want 200", i+1, got)
				}
			}
			if got := send("u3"); got != tt.third {
				t.Errorf("first request of u3 = %d, want %d", got, tt.third)
			}
		})
	}
}
