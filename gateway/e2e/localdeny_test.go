package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/redistest"
)

// limiterScripts returns how many rate-limit scripts the lines of a MONITOR
// stream show: EVALSHA or EVAL on anything but the overrides table, which
// the gateway polls on its own.
func limiterScripts(lines []string) int {
	n := 0
	for _, line := range lines {
		if (strings.Contains(line, `"EVALSHA"`) || strings.Contains(line, `"EVAL"`)) && !strings.Contains(line, ":{overrides}") {
			n++
		}
	}
	return n
}

// TestRedisLocalDeny: through the sluice binary on a Redis of its own, a
// client that keeps sending after Redis denied it gets 429s with a
// Retry-After counting down and costs no Redis script (store.local_deny,
// on by default, docs/semantics.md §6.6); once the denial has run out its
// next request reaches Redis again and is admitted.
func TestRedisLocalDeny(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t, redistest.ServerOptions{})
	mon, err := srv.Monitor()
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	scripts := func() int {
		t.Helper()
		lines, err := mon.Lines(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return limiterScripts(lines)
	}
	up := newUpstream(t)
	p := start(t, fmt.Sprintf("store: {type: redis, timeout: 500ms, redis: {addrs: [%q]}}\n", srv.Addr())+header+`
policies:
  slow: {algorithm: token_bucket, capacity: 2, rate: 0.25}
routes:
  - id: api
    match: {path: /api/**}
    upstream: `+up.URL+`
    limits: [{policy: slow, key: header:X-User-Id}]
`)
	abuser := []string{"X-User-Id", "abuser"}
	for i, want := range []int{200, 200, 429} {
		if r := get(t, p.base+"/api/x", abuser...); r.code != want {
			t.Fatalf("request %d = %d, want %d", i+1, r.code, want)
		}
	}
	deniedAt := time.Now() // Redis's denial: one unit back within 4s
	if n := scripts(); n < 3 {
		t.Fatalf("%d limiter scripts for the first 3 requests, want at least 3", n)
	}
	const abusive = 20
	last := 5
	for i := range abusive {
		r := get(t, p.base+"/api/x", abuser...)
		ra, err := strconv.Atoi(r.header.Get("Retry-After"))
		if r.code != 429 || err != nil || ra < 1 || ra > last {
			t.Fatalf("abusive request %d = %d, Retry-After %q; want 429 with a Retry-After from 4 down", i+1, r.code, r.header.Get("Retry-After"))
		}
		last = ra
	}
	if time.Since(deniedAt) > 3*time.Second {
		t.Skip("the machine is too slow for this timeline: the denial may have run out")
	}
	if n := scripts(); n != 0 {
		t.Fatalf("%d limiter scripts for %d requests of a key Redis denied, want 0", n, abusive)
	}
	if v := p.metric(`sluice_local_deny_decisions_total{route="api"}`); v != strconv.Itoa(abusive) {
		t.Errorf("sluice_local_deny_decisions_total = %q, want %d", v, abusive)
	}
	if r := get(t, p.base+"/api/x", "X-User-Id", "someone"); r.code != 200 {
		t.Fatalf("another key = %d, want 200", r.code)
	}
	if n := scripts(); n != 1 {
		t.Fatalf("another key: %d limiter scripts, want 1", n)
	}
	time.Sleep(time.Until(deniedAt.Add(4*time.Second + 200*time.Millisecond)))
	if r := get(t, p.base+"/api/x", abuser...); r.code != 200 {
		t.Fatalf("after the Retry-After = %d, want 200", r.code)
	}
	if n := scripts(); n != 1 {
		t.Fatalf("after the Retry-After: %d limiter scripts, want 1", n)
	}
}
