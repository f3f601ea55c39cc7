package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// The acceptance tests of load shedding by upstream latency: the signal follows the upstream, not one client.

// latencyUpstream reads each request's body, then answers after extra, plus
// a second on /slow/….
type latencyUpstream struct {
	*httptest.Server
	extra atomic.Int64 // ns
}

func newLatencyUpstream(t *testing.T) *latencyUpstream {
	t.Helper()
	u := &latencyUpstream{}
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) //nolint:errcheck // a test upstream
		d := time.Duration(u.extra.Load())
		if strings.HasPrefix(r.URL.Path, "/slow/") {
			d += time.Second
		}
		if d > 0 {
			time.Sleep(d)
		}
		w.Write([]byte("ok"))
	}))
	t.Cleanup(u.Server.Close)
	return u
}

// latencyShedFront serves, on one upstream, /users/… (priority low),
// /slow/… and /upload/… (critical: never shed, so they keep measuring),
// each limited per X-User far above what the tests send, with the given
// latency_threshold.
func latencyShedFront(t *testing.T, upstream string, threshold time.Duration) (*Gateway, string) {
	t.Helper()
	key := httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}}
	var routes []config.Route
	for _, r := range []struct{ id, priority string }{{"users", config.PriorityLow}, {"slow", config.PriorityCritical}, {"upload", config.PriorityCritical}} {
		rc := upstreamRoute(r.id, "/"+r.id+"/**", upstream)
		rc.Timeout = 30 * time.Second
		rc.Priority = r.priority
		rc.Limits = []config.Limit{{Policy: "generous", Key: key, Cost: 1}}
		routes = append(routes, rc)
	}
	cfg := testConfig(routes...)
	cfg.Policies["generous"] = config.PolicySpec{Algorithm: ratelimit.FixedWindow, Limit: 1 << 30, Window: time.Hour}
	cfg.Shedding = &config.Shedding{MaxInFlight: 1 << 20, LeaseTTL: 30 * time.Second, Share: config.DefaultShedShares,
		LatencyThreshold: threshold}
	g := newTestGateway(t, cfg)
	front := httptest.NewServer(g)
	t.Cleanup(front.Close)
	return g, front.URL
}

// tally counts the answers of a load by kind.
type tally struct {
	mu        sync.Mutex
	ok, shed  int
	other     []string
	firstShed time.Time
}

func (tl *tally) add(status int, body string, err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	switch {
	case err == nil && status == http.StatusOK:
		tl.ok++
	case err == nil && status == http.StatusServiceUnavailable && strings.Contains(body, "upstream is slow"):
		tl.shed++
		if tl.firstShed.IsZero() {
			tl.firstShed = time.Now()
		}
	default:
		tl.other = append(tl.other, fmt.Sprintf("%d %v %.80s", status, err, body))
	}
}

func (tl *tally) counts() (ok, shed int, other []string, firstShed time.Time) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.ok, tl.shed, append([]string(nil), tl.other...), tl.firstShed
}

// runUsers has each of users send GET path, one request after another,
// one every period (spread over the period), until stop is closed; wait
// returns when they have all stopped.
func runUsers(t *testing.T, front, path string, users []string, period time.Duration, stop <-chan struct{}, tl *tally) (wait func()) {
	t.Helper()
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			select {
			case <-time.After(time.Duration(i) * period / time.Duration(len(users))):
			case <-stop:
				return
			}
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				status, _, body, err := getAs(t.Context(), front, path, u)
				tl.add(status, body, err)
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		})
	}
	return wg.Wait
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// tricklePost sends a POST of a 10-byte body to front's path as user, one
// byte every every, on a connection of its own, and returns the answer's
// status.
func tricklePost(front, path, user string, every time.Duration) (int, error) {
	c, err := net.Dial("tcp", strings.TrimPrefix(front, "http://"))
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck // a failure shows in the read
	const size = 10
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: test\r\nX-User: %s\r\nContent-Length: %d\r\nConnection: close\r\n\r\n", path, user, size); err != nil {
		return 0, err
	}
	for range size {
		time.Sleep(every) // the client's pace, not the test waiting on time
		if _, err := c.Write([]byte("x")); err != nil {
			return 0, err
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestLatencyShedTrickledBodies: four POSTs a
// second whose bodies trickle in over 2.5 s, each from a client of its own,
// shed none of the other users' requests to the same upstream: the
// upstream's latency starts once the request's last byte is written to it.
func TestLatencyShedTrickledBodies(t *testing.T) {
	up := newLatencyUpstream(t)
	_, front := latencyShedFront(t, up.URL, 300*time.Millisecond)
	stop := make(chan struct{})
	var users tally
	wait := runUsers(t, front, "/users/list", names("user", 4), 250*time.Millisecond, stop, &users)
	var uploads sync.WaitGroup
	for i := range 12 { // 4 a second for 3 s
		uploads.Go(func() {
			status, err := tricklePost(front, "/upload/file", fmt.Sprintf("uploader-%d", i), 250*time.Millisecond)
			if err != nil || status != http.StatusOK {
				t.Errorf("trickled POST %d = %d (%v), want 200", i, status, err)
			}
		})
		time.Sleep(250 * time.Millisecond) // the uploads' pace
	}
	uploads.Wait()
	close(stop)
	wait()
	ok, shed, other, _ := users.counts()
	if shed > 0 || len(other) > 0 {
		t.Errorf("other users' requests during the trickled POSTs: %d answered, %d shed for latency, other answers %q; want none shed", ok, shed, other)
	}
	if ok < 40 {
		t.Errorf("only %d of the other users' requests answered, want at least 40", ok)
	}
}

// TestLatencyShedOneSlowKey: one key calling a
// 1 s endpoint 4 times a second sheds at most 1% of the requests of 50
// other keys to the same upstream: each key counts once in the upstream's
// latency.
func TestLatencyShedOneSlowKey(t *testing.T) {
	up := newLatencyUpstream(t)
	_, front := latencyShedFront(t, up.URL, 200*time.Millisecond)
	stop := make(chan struct{})
	var slow tally
	var slowCalls sync.WaitGroup
	slowDone := make(chan struct{})
	go func() { // the slow key: 4 calls a second, each taking 1 s
		defer close(slowDone)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			slowCalls.Go(func() {
				status, _, body, err := getAs(t.Context(), front, "/slow/report", "heavy")
				slow.add(status, body, err)
			})
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	// The others start once the slow key's answers come in.
	time.Sleep(1200 * time.Millisecond) // the load's schedule
	var others tally
	wait := runUsers(t, front, "/users/list", names("user", 50), 2*time.Second, stop, &others)
	time.Sleep(8 * time.Second) // the load's length
	close(stop)
	wait()
	<-slowDone
	slowCalls.Wait()
	ok, shed, other, _ := others.counts()
	total := ok + shed + len(other)
	if len(other) > 0 {
		t.Errorf("other keys' unexpected answers: %q", other)
	}
	if total < 150 {
		t.Fatalf("only %d requests of the other keys, want at least 150", total)
	}
	if shed*100 > total {
		t.Errorf("%d of the other keys' %d requests shed for latency, want at most 1%%", shed, total)
	}
	if sok, _, sother, _ := slow.counts(); sok < 20 || len(sother) > 0 {
		t.Errorf("the slow key's calls: %d answered, other answers %q; want at least 20 answered, no other", sok, sother)
	}
}

// TestLatencyShedEveryKeySlow: when the upstream
// slows down by a second for every key, shedding starts within 5 s.
func TestLatencyShedEveryKeySlow(t *testing.T) {
	up := newLatencyUpstream(t)
	_, front := latencyShedFront(t, up.URL, 300*time.Millisecond)
	stop := make(chan struct{})
	var before tally
	wait := runUsers(t, front, "/users/list", names("user", 10), 100*time.Millisecond, stop, &before)
	time.Sleep(time.Second) // the load's schedule: a second of fast answers
	close(stop)
	wait()
	if ok, shed, other, _ := before.counts(); shed > 0 || len(other) > 0 || ok == 0 {
		t.Fatalf("while the upstream is fast: %d answered, %d shed, other %q; want none shed", ok, shed, other)
	}
	up.extra.Store(int64(time.Second))
	slowSince := time.Now()
	stop = make(chan struct{})
	var after tally
	wait = runUsers(t, front, "/users/list", names("user", 10), 100*time.Millisecond, stop, &after)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, shed, _, _ := after.counts(); shed > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
	close(stop)
	wait()
	ok, shed, other, first := after.counts()
	if len(other) > 0 {
		t.Errorf("unexpected answers: %q", other)
	}
	if shed == 0 {
		t.Fatalf("no request shed in 10 s of every key slow (%d answered)", ok)
	}
	if d := first.Sub(slowSince); d > 5*time.Second {
		t.Errorf("shedding started %v after every key went slow, want within 5s", d)
	}
}
