package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// TestLongKeysBoundedRSS sends the built binary 20,000 requests, each with a
// distinct 8 KB key header, with a window long enough that every key stays
// tracked, on the memory store and on a healthy Redis store, whose local
// fallback mirrors every key. Both keep a fixed-size digest per key, not the
// key, so the process grows by less than 20 MB (it grew by 274 MB while the
// memory store kept the keys).
func TestLongKeysBoundedRSS(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		checkLongKeysRSS(t, "store: {type: memory}", "memory")
	})
	t.Run("redis fallback mirror", func(t *testing.T) {
		redistest.Check(t, standaloneErr)
		checkLongKeysRSS(t, fmt.Sprintf("store: {type: redis, prefix: longkeys, timeout: 500ms, redis: {addrs: [%q]}}", standalone.Addr()), "fallback")
	})
}

// checkLongKeysRSS runs TestLongKeysBoundedRSS on the store section
// storeYAML, whose in-process store is named store in sluice_store_keys.
func checkLongKeysRSS(t *testing.T, storeYAML, store string) {
	const (
		keys    = 20_000
		keySize = 8 << 10
		workers = 8
		bound   = 20 << 20
	)
	p := start(t, `
server: {listen: "127.0.0.1:0", shutdown_timeout: 10s}
admin: {listen: "127.0.0.1:0"}
`+storeYAML+`
policies:
  hourly: {algorithm: fixed_window, limit: 10, window: 1h}
routes:
  - id: keyed
    match: {path: /keyed}
    respond: {body: "ok\n"}
    limits:
      - {policy: hourly, key: header:X-Key}
`)
	pid := p.PID()
	send := func(c *http.Client, key string) error {
		req, err := http.NewRequestWithContext(context.Background(), "GET", p.base+"/keyed", nil)
		if err != nil {
			return err
		}
		req.Header.Set("X-Key", key)
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("status %d, want 200", resp.StatusCode)
		}
		return nil
	}
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: workers}}
	defer c.CloseIdleConnections()
	// Warm up the connections, their buffers and the heap with long keys
	// first, so that only the keys count.
	for i := range 200 {
		if err := send(c, "warm-"+strconv.Itoa(i)+":"+strings.Repeat("w", keySize)); err != nil {
			t.Fatal(err)
		}
	}
	before := int64(processRSS(t, pid))
	deadline := time.Now().Add(3 * time.Minute)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			buf := []byte(strings.Repeat("k", keySize))
			for {
				i := next.Add(1) - 1
				if i >= keys {
					return
				}
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("only %d of %d requests sent within 3 minutes", i, keys)
					return
				}
				copy(buf, strconv.FormatInt(i, 10)+":")
				if err := send(c, string(buf)); err != nil {
					errs <- fmt.Errorf("request %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	after := int64(processRSS(t, pid))
	if got, want := p.metric(`sluice_store_keys{store="`+store+`"}`), strconv.Itoa(keys+200); got != want {
		t.Errorf("sluice_store_keys = %q, want %s: every key tracked", got, want)
	}
	grown := after - before
	t.Logf("%d distinct %d-byte keys: RSS %.1f MiB -> %.1f MiB (+%.1f MiB)", keys, keySize,
		float64(before)/(1<<20), float64(after)/(1<<20), float64(grown)/(1<<20))
	if grown >= bound {
		t.Errorf("RSS grew by %.1f MiB for %d keys of %d bytes, want < %d MiB", float64(grown)/(1<<20), keys, keySize, bound>>20)
	}
}
