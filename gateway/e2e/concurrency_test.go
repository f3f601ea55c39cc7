package e2e

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/sluicetest"
)

// concurrencyConfig limits each X-User to one request in flight, with a
// short lease TTL.
func concurrencyConfig(store, up string) string {
	return header + store + fmt.Sprintf(`
policies:
  one: {algorithm: concurrency, limit: 1, lease_ttl: 1500ms}
routes:
  - id: slow
    match: {path: "/**"}
    upstream: %q
    timeout: 2m
    limits:
      - {policy: one, key: "header:X-User"}
`, up)
}

// TestConcurrencyKilledInstanceFreesLeases: an instance killed (SIGKILL)
// while its request is in flight cannot release the lease; the lease
// expires within lease_ttl and another instance admits the key again.
// Until then the other instance denies the key.
func TestConcurrencyKilledInstanceFreesLeases(t *testing.T) {
	t.Parallel()
	for _, rs := range redisStores {
		t.Run(rs.name, func(t *testing.T) {
			t.Parallel()
			up := newUpstream(t)
			cfg := concurrencyConfig(rs.store(t, prefix(t)), up.URL)
			path := writeConfig(t, cfg)
			victim, err := sluicetest.Start(binary, sluicetest.Options{Args: []string{"serve", "--config", path}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { victim.Stop(5 * time.Second) })
			survivor := start(t, cfg)

			go func() {
				req, _ := http.NewRequestWithContext(t.Context(), "GET", victim.Base+"/hold?sleep=60s", nil)
				req.Header.Set("X-User", "alice")
				if resp, err := http.DefaultClient.Do(req); err == nil { // the instance dies under it
					resp.Body.Close()
				}
			}()
			deadline := time.Now().Add(20 * time.Second)
			for up.hits.Load() < 1 {
				if time.Now().After(deadline) {
					t.Fatal("the request through the victim did not reach the upstream within 20s")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if r := get(t, survivor.base+"/probe", "X-User", "alice"); r.code != http.StatusTooManyRequests {
				t.Fatalf("survivor, while the victim holds alice's slot = %d, want 429", r.code)
			}
			if err := victim.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-victim.Exited()
			killed := time.Now()
			// The lease was taken before the kill, so it expires at most
			// lease_ttl (1.5s) after it; allow generous slack for a noisy
			// machine, and far less than the 60s the request would last.
			for {
				r := get(t, survivor.base+"/probe", "X-User", "alice")
				if r.code == http.StatusOK {
					break
				}
				if r.code != http.StatusTooManyRequests {
					t.Fatalf("survivor probe = %d, want 429 then 200", r.code)
				}
				if time.Since(killed) > 10*time.Second {
					t.Fatal("alice's lease outlived its killed holder by more than 10s (lease_ttl 1.5s)")
				}
				time.Sleep(50 * time.Millisecond)
			}
			if waited := time.Since(killed); waited > 1500*time.Millisecond+time.Second {
				t.Logf("the slot came back %v after the kill (lease_ttl 1.5s)", waited)
			}
		})
	}
}
