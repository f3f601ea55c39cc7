package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// arrival is one request as a recording upstream saw it.
type arrival struct {
	id string // X-Req-Id
	at time.Time
}

// arrivals is an upstream that records when each request reaches it.
type arrivals struct {
	*httptest.Server
	mu   sync.Mutex
	seen []arrival
}

func newArrivals(t *testing.T) *arrivals {
	u := &arrivals{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, arrival{r.Header.Get("X-Req-Id"), time.Now()})
		u.mu.Unlock()
		w.Write([]byte("ok"))
	}))
	t.Cleanup(u.Close)
	return u
}

func (u *arrivals) list() []arrival {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.seen)
}

// TestSpecShapeSpacing: leaky_bucket in shape mode holds each admitted
// request for level_before/r (docs/semantics.md §2.4), so a burst reaches the upstream
// spaced by 1/r, in the order the gateway queued it. Timing bounds are
// lower bounds with generous slack; nothing asserts an upper bound.
func TestSpecShapeSpacing(t *testing.T) {
	t.Parallel()
	up := newArrivals(t)
	p := start(t, `store: {type: memory}`+header+`
policies:
  shaped: {algorithm: leaky_bucket, capacity: 10, rate: 5, mode: shape}
routes:
  - id: shaped
    match: {path: /shaped}
    upstream: `+up.URL+`
    limits: [{policy: shaped, key: header:X-User-Id}]
`)
	const (
		n        = 5
		capacity = 10
		interval = 200 * time.Millisecond // 1/r
	)
	remaining := make(map[string]int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	sent := time.Now()
	for i := range n {
		wg.Go(func() {
			id := strconv.Itoa(i)
			r := get(t, p.base+"/shaped", "X-User-Id", "burst", "X-Req-Id", id)
			if r.code != 200 {
				t.Errorf("request %s: %d %s, want 200 (queue room for %d)", id, r.code, r.body, n)
				return
			}
			rem, err := strconv.Atoi(r.header.Get("X-RateLimit-Remaining"))
			if err != nil {
				t.Errorf("request %s: X-RateLimit-Remaining %q", id, r.header.Get("X-RateLimit-Remaining"))
			}
			mu.Lock()
			remaining[id] = rem
			mu.Unlock()
		})
	}
	wg.Wait()
	got := up.list()
	if len(got) != n {
		t.Fatalf("the upstream saw %d requests, want %d", len(got), n)
	}
	slices.SortFunc(got, func(a, b arrival) int { return a.at.Compare(b.at) })
	// Queue position: the units ahead of a request when it was admitted,
	// capacity − 1 − its X-RateLimit-Remaining (the queue room after it).
	ahead := func(id string) int { return capacity - 1 - remaining[id] }
	first := -1
	for i, a := range got {
		if ahead(a.id) == 0 {
			first = i
			break
		}
	}
	if first < 0 {
		t.Fatalf("no request was admitted with an empty queue: remaining %v", remaining)
	}
	t0 := got[first].at
	var offsets []string
	for _, a := range got {
		offsets = append(offsets, fmt.Sprintf("%s(ahead %d)@%v", a.id, ahead(a.id), a.at.Sub(t0).Round(time.Millisecond)))
	}
	t.Logf("arrivals at the upstream: %v (1/r = %v)", offsets, interval)
	// Each request is held until the units ahead of it have leaked: it
	// reaches the upstream no earlier than ahead/r after the first (less
	// half an interval for the first's own delivery time). A late timer
	// only makes arrivals later, so there is no upper bound.
	for _, a := range got {
		if min := time.Duration(ahead(a.id))*interval - interval/2; a.at.Sub(t0) < min {
			t.Errorf("request %s with %d ahead reached the upstream %v after the first, want at least %v", a.id, ahead(a.id), a.at.Sub(t0), min)
		}
		// Timers never fire early: nothing with k ahead is forwarded
		// before k/r after the burst was sent (less clock granularity).
		if min := time.Duration(ahead(a.id))*interval - 5*time.Millisecond; a.at.Sub(sent) < min {
			t.Errorf("request %s with %d ahead reached the upstream %v after the burst was sent, want at least %v", a.id, ahead(a.id), a.at.Sub(sent), min)
		}
	}
	// Order: requests two or more places apart in the queue (at least 2/r
	// apart in time) reach the upstream in queue order.
	for i := range got {
		for j := i + 1; j < len(got); j++ {
			if ahead(got[i].id) >= ahead(got[j].id)+2 {
				t.Errorf("request %s (%d ahead) reached the upstream before request %s (%d ahead): out of queue order",
					got[i].id, ahead(got[i].id), got[j].id, ahead(got[j].id))
			}
		}
	}
	if last := got[len(got)-1]; ahead(last.id) < n-2 {
		t.Errorf("the last arrival had %d ahead, want %d or %d", ahead(last.id), n-2, n-1)
	}
}

// TestSpecShapeClientGone: a client that leaves while its request is held
// in shape mode never reaches the upstream.
func TestSpecShapeClientGone(t *testing.T) {
	t.Parallel()
	up := newArrivals(t)
	p := start(t, `store: {type: memory}`+adminHeader+`
policies:
  slow: {algorithm: leaky_bucket, capacity: 5, rate: 1, mode: shape}
routes:
  - id: slow
    match: {path: /slow}
    upstream: `+up.URL+`
    limits: [{policy: slow, key: header:X-User-Id}]
`)
	user := []string{"X-User-Id", "leaver"}
	if r := get(t, p.base+"/slow", append(user, "X-Req-Id", "first")...); r.code != 200 {
		t.Fatalf("first request: %d %s", r.code, r.body)
	}
	room := func() int {
		var v struct{ Limits []struct{ Remaining int } }
		r := get(t, p.admin+"/admin/v1/limits/slow/leaver", auth...)
		if err := json.Unmarshal([]byte(r.body), &v); err != nil || len(v.Limits) != 1 {
			t.Fatalf("GET limits: %d %s", r.code, r.body)
		}
		return v.Limits[0].Remaining
	}
	before := room()

	// The second request is admitted and held for about 1 s (one unit ahead
	// of it at 1/s).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/slow", nil)
		req.Header.Set("X-User-Id", "leaver")
		req.Header.Set("X-Req-Id", "abandoned")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d", resp.StatusCode)
		}
		done <- err
	}()
	// It is being held once the store has counted it.
	waitUntil(t, 5*time.Second, "the second request is admitted and held", func() bool { return room() < before })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("the abandoned request: %v, want it cancelled by the client", err)
	}
	// A third request queues behind the abandoned one's slot, so by the
	// time it reaches the upstream the abandoned one would have too.
	if r := get(t, p.base+"/slow", append(user, "X-Req-Id", "after")...); r.code != 200 {
		t.Fatalf("third request: %d %s", r.code, r.body)
	}
	var ids []string
	for _, a := range up.list() {
		ids = append(ids, a.id)
	}
	if fmt.Sprint(ids) != "[first after]" {
		t.Errorf("the upstream saw %q, want [first after]: a request whose client left while held must not be forwarded", ids)
	}
}

// TestSpecShapeClientGonePastHeaderTimeout: a GET held in shape mode for
// longer than read_header_timeout is still watched: its client leaving
// after the headers' deadline has passed still keeps it from the upstream.
func TestSpecShapeClientGonePastHeaderTimeout(t *testing.T) {
	t.Parallel()
	up := newArrivals(t)
	p := start(t, `server: {listen: "127.0.0.1:0", shutdown_timeout: 10s, read_header_timeout: 1s}
admin: {listen: "127.0.0.1:0"}
store: {type: memory}
policies:
  slow: {algorithm: leaky_bucket, capacity: 5, rate: 0.4, mode: shape}
routes:
  - id: slow
    match: {path: /slow}
    upstream: `+up.URL+`
    limits: [{policy: slow, key: header:X-User-Id}]
`)
	if r := get(t, p.base+"/slow", "X-User-Id", "leaver", "X-Req-Id", "first"); r.code != 200 {
		t.Fatalf("first request: %d %s", r.code, r.body)
	}
	// The second request is held for 2.5 s (one unit ahead of it at 0.4/s);
	// its client leaves 1.6 s in, past the 1 s headers' deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 1600*time.Millisecond)
	defer cancel()
	heldAt := time.Now()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/slow", nil)
	req.Header.Set("X-User-Id", "leaver")
	req.Header.Set("X-Req-Id", "abandoned")
	resp, err := client.Do(req)
	if err == nil {
		resp.Body.Close()
		t.Fatalf("the held request was answered %d before its client left", resp.StatusCode)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the held request: %v, want its client to give up", err)
	}
	// Past the end of the hold, with a margin, the upstream has seen only
	// the first request.
	time.Sleep(time.Until(heldAt.Add(2500*time.Millisecond + 1500*time.Millisecond)))
	var ids []string
	for _, a := range up.list() {
		ids = append(ids, a.id)
	}
	if fmt.Sprint(ids) != "[first]" {
		t.Errorf("the upstream saw %q, want [first]: a request whose client left while held must not be forwarded", ids)
	}
}
