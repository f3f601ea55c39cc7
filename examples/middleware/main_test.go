package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/ratelimit/kit"
	"github.com/sluice-gw/sluice/store/memory"
)

func TestHandler(t *testing.T) {
	clock := kit.NewManualClock(time.Unix(1_764_100_000, 0))
	store, err := memory.New(memory.Options{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	h, err := newHandler(store, clock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	get := func(key string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/hello", nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	admitted := func(key string, n int) (ok int) {
		for range n {
			if get(key).StatusCode == http.StatusOK {
				ok++
			}
		}
		return ok
	}
	if got := admitted("k1", 8); got != 5 {
		t.Errorf("k1 admitted %d of 8, want 5", got)
	}
	if got := admitted("", 8); got != 5 {
		t.Errorf("anonymous admitted %d of 8, want 5", got)
	}
	if got := admitted("demo1234", 8); got != 8 {
		t.Errorf("demo1234 admitted %d of 8, want 8 (vip)", got)
	}
	resp := get("k1")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" ||
		resp.Header.Get("RateLimit") != `"per-key";r=0;t=1, "global";r=982;t=0` {
		t.Errorf("got %d Retry-After %q RateLimit %q", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("RateLimit"))
	}
	clock.Advance(time.Second)
	if got := admitted("k1", 2); got != 1 {
		t.Errorf("k1 after 1s admitted %d of 2, want 1", got)
	}
}
