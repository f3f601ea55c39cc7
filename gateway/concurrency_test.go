package gateway

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/redistest"
	"github.com/sluice-gw/sluice/internal/testkit"
	"github.com/sluice-gw/sluice/ratelimit"
)

// slowUpstream holds every request until its gate opens, counting the
// requests it received and the most in progress at once.
type slowUpstream struct {
	*httptest.Server
	total, inflight, most atomic.Int64
	gate                  atomic.Pointer[gate]
}

// gate is closed once.
type gate struct {
	ch   chan struct{}
	once sync.Once
}

func newSlowUpstream(t *testing.T) *slowUpstream {
	t.Helper()
	u := &slowUpstream{}
	u.close()
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.total.Add(1)
		n := u.inflight.Add(1)
		for m := u.most.Load(); n > m && !u.most.CompareAndSwap(m, n); m = u.most.Load() {
		}
		defer u.inflight.Add(-1)
		if r.URL.Path == "/stream" {
			w.Write([]byte("first\n"))
			w.(http.Flusher).Flush()
		}
		select {
		case <-u.gate.Load().ch:
		case <-r.Context().Done():
			return
		}
		w.Write([]byte("done\n"))
	}))
	t.Cleanup(func() {
		u.open()
		u.Server.Close()
	})
	return u
}

// close makes new requests wait; open lets every waiting one through.
func (u *slowUpstream) close() { u.gate.Store(&gate{ch: make(chan struct{})}) }

func (u *slowUpstream) open() {
	g := u.gate.Load()
	g.once.Do(func() { close(g.ch) })
}

// waitFor polls cond for up to d (generous: the machine is noisy).
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// leaseConfig is a config with one route to upstream limited to n requests
// in flight per X-User, leases living ttl.
func leaseConfig(upstream string, n int64, ttl time.Duration) *config.Config {
	rc := upstreamRoute("slow", "/**", upstream)
	rc.Timeout = 30 * time.Second
	rc.Limits = []config.Limit{{Policy: "inflight", Key: httplimit.Key{{Source: httplimit.SourceHeader, Name: "X-User"}}, Cost: 1}}
	cfg := testConfig(rc)
	cfg.Policies["inflight"] = config.PolicySpec{Algorithm: ratelimit.Concurrency, Limit: n, LeaseTTL: ttl}
	return cfg
}

// leaseStores are the shared stores the concurrency tests run on: the
// memory store (one instance only), standalone Redis and Redis Cluster.
type leaseStore struct {
	name   string
	shared bool
	apply  func(t *testing.T, cfg *config.Config)
}

func leaseStores() []leaseStore {
	redisStore := func(mode config.RedisMode, addrs []string, cfg *config.Config) {
		cfg.Store.Type, cfg.Store.Timeout = config.StoreRedis, time.Second
		cfg.Store.Redis = config.Redis{Mode: mode, Addrs: addrs}
	}
	return []leaseStore{
		{"memory", false, func(*testing.T, *config.Config) {}},
		{"redis", true, func(t *testing.T, cfg *config.Config) {
			srv := redistest.NewServer(t, redistest.ServerOptions{})
			redisStore(config.RedisStandalone, []string{srv.Addr()}, cfg)
		}},
		{"cluster", true, func(t *testing.T, cfg *config.Config) {
			c := redistest.NewCluster(t, redistest.ClusterOptions{})
			redisStore(config.RedisCluster, c.Addrs(), cfg)
		}},
	}
}

// getAs sends GET path as user to front and returns the status, headers and body.
func getAs(ctx context.Context, front, path, user string) (int, http.Header, string, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", front+path, nil)
	if err != nil {
		return 0, nil, "", err
	}
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), err
}

// TestConcurrencyAcrossInstances: N+1 slow requests of one key, spread over
// three gateways sharing the store: exactly N reach the upstream, the other
// is answered 429 with Retry-After and the IETF headers naming the policy;
// once they end, their slots serve new requests at once, and another key
// was never limited by them.
func TestConcurrencyAcrossInstances(t *testing.T) {
	const n = 3
	for _, st := range leaseStores() {
		t.Run(st.name, func(t *testing.T) {
			up := newSlowUpstream(t)
			cfg := leaseConfig(up.URL, n, 30*time.Second)
			st.apply(t, cfg)
			instances := 1
			if st.shared {
				instances = 3
			}
			var fronts []string
			for range instances {
				front := httptest.NewServer(newTestGateway(t, cfg))
				t.Cleanup(front.Close)
				fronts = append(fronts, front.URL)
			}
			type answer struct {
				status int
				hdr    http.Header
				err    error
			}
			answers := make(chan answer, n+1)
			for i := range n + 1 {
				go func() {
					status, hdr, _, err := getAs(t.Context(), fronts[i%len(fronts)], "/slow", "alice")
					answers <- answer{status, hdr, err}
				}()
			}
			// The denied one answers at once; the others wait at the upstream.
			var denied answer
			select {
			case denied = <-answers:
			case <-time.After(20 * time.Second):
				t.Fatal("no answer within 20s: the request over the limit was not denied")
			}
			if denied.err != nil || denied.status != http.StatusTooManyRequests {
				t.Fatalf("first answer = %d (%v), want 429 while %d requests hold the slots", denied.status, denied.err, n)
			}
			if got := denied.hdr.Get("Retry-After"); got != "1" {
				t.Errorf("429: Retry-After = %q, want 1", got)
			}
			if got := denied.hdr.Get(httplimit.HeaderRateLimitPolicy); !strings.Contains(got, `"inflight";q=3;w=30`) {
				t.Errorf("429: RateLimit-Policy = %q, want the inflight policy (q=3, w=30)", got)
			}
			if got := denied.hdr.Get(httplimit.HeaderRateLimit); !strings.Contains(got, `"inflight";r=0`) {
				t.Errorf("429: RateLimit = %q, want the inflight policy with r=0", got)
			}
			waitFor(t, 20*time.Second, "the admitted requests did not all reach the upstream", func() bool { return up.inflight.Load() == n })
			// Another key has slots of its own.
			other := make(chan int, 1)
			go func() {
				status, _, _, _ := getAs(t.Context(), fronts[0], "/slow", "bob")
				other <- status
			}()
			waitFor(t, 20*time.Second, "bob's request did not reach the upstream", func() bool { return up.inflight.Load() == n+1 })
			up.open()
			for range n {
				if a := <-answers; a.err != nil || a.status != http.StatusOK {
					t.Errorf("admitted request = %d (%v), want 200", a.status, a.err)
				}
			}
			if s := <-other; s != http.StatusOK {
				t.Errorf("bob's request = %d, want 200", s)
			}
			if got := up.total.Load(); got != n+1 {
				t.Fatalf("the upstream received %d requests, want %d of alice and 1 of bob", got, n)
			}

			// Released slots are free again: n more slow requests all
			// reach the upstream. A release runs as the response ends, so a
			// request sent right after may still see the slot; it retries
			// within a bound far below the 30s lease TTL.
			up.close()
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					deadline := time.Now().Add(5 * time.Second)
					for {
						status, _, _, err := getAs(t.Context(), fronts[i%len(fronts)], "/slow", "alice")
						if err == nil && status == http.StatusOK {
							return
						}
						if err != nil || status != http.StatusTooManyRequests || time.Now().After(deadline) {
							t.Errorf("request after the releases = %d (%v), want 200 within 5s (lease TTL 30s)", status, err)
							return
						}
						time.Sleep(10 * time.Millisecond)
					}
				})
			}
			waitFor(t, 20*time.Second, "the requests after the releases did not all reach the upstream", func() bool { return up.inflight.Load() == n })
			up.open()
			wg.Wait()
			if got := up.most.Load(); got != n+1 {
				t.Errorf("at most %d requests at the upstream at once, want %d (n of alice, 1 of bob)", got, n+1)
			}
		})
	}
}

// TestConcurrencyReleasedOnEveryEnd: a request's slot comes back however
// its response ends: an upstream error (502), a timeout (504), a client that
// left, a streamed body, an upgraded connection. The lease TTL (30s) is far
// beyond the test's bounds, so only a release can free the slot.
func TestConcurrencyReleasedOnEveryEnd(t *testing.T) {
	up := newSlowUpstream(t)
	cfg := leaseConfig(up.URL, 1, 30*time.Second)
	dead := upstreamRoute("dead", "/dead", "http://127.0.0.1:1")
	short := upstreamRoute("short", "/short", up.URL)
	short.Timeout = 100 * time.Millisecond
	for _, rc := range []*config.Route{&dead, &short} {
		rc.Limits = cfg.Routes[0].Limits
	}
	cfg.Routes = append([]config.Route{dead, short}, cfg.Routes...)
	front := httptest.NewServer(newTestGateway(t, cfg))
	defer front.Close()
	ctx := t.Context()

	for i := range 3 {
		if status, _, _, err := getAs(ctx, front.URL, "/dead", "u"); err != nil || status != http.StatusBadGateway {
			t.Fatalf("dead upstream, request %d = %d (%v), want 502 (a 429 means the failed request kept its slot)", i+1, status, err)
		}
		if status, _, _, err := getAs(ctx, front.URL, "/short", "u"); err != nil || status != http.StatusGatewayTimeout {
			t.Fatalf("upstream timeout, request %d = %d (%v), want 504 (a 429 means the timed-out request kept its slot)", i+1, status, err)
		}
	}

	// The client leaves while the upstream works: the slot stays taken
	// while the upstream holds the request, and comes back when it ends.
	cctx, cancel := context.WithCancel(ctx)
	left := make(chan error, 1)
	go func() { _, _, _, err := getAs(cctx, front.URL, "/slow", "u"); left <- err }()
	waitFor(t, 10*time.Second, "the request did not reach the upstream", func() bool { return up.inflight.Load() == 1 })
	cancel()
	if err := <-left; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	up.open()
	waitFor(t, 10*time.Second, "the upstream did not finish the abandoned request", func() bool { return up.inflight.Load() == 0 })
	eventually200(t, front.URL, "/released")
	up.close()

	// A streamed body holds the slot until it ends.
	resp := startStream(t, front.URL)
	if status, _, _, _ := getAs(ctx, front.URL, "/other", "u"); status != http.StatusTooManyRequests {
		t.Errorf("request while a body streams = %d, want 429", status)
	}
	up.open()
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	eventually200(t, front.URL, "/after-stream")
}

// startStream starts a streamed response and returns once its first line
// has arrived.
func startStream(t *testing.T, front string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", front+"/stream", nil)
	req.Header.Set("X-User", "u")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream = %d, want 200", resp.StatusCode)
	}
	if line, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil || line != "first\n" {
		t.Fatalf("stream's first line = %q (%v)", line, err)
	}
	return resp
}

// eventually200 sends requests of user u (the upstream's gate open) until
// one is admitted, within 5s.
func eventually200(t *testing.T, front, path string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _, _, err := getAs(t.Context(), front, path, "u")
		if err != nil {
			t.Fatal(err)
		}
		if status == http.StatusOK {
			return
		}
		if status != http.StatusTooManyRequests {
			t.Fatalf("probe = %d, want 429 or, once the slot is back, 200", status)
		}
		if time.Now().After(deadline) {
			t.Fatal("the slot did not come back within 5s (lease TTL 30s): the lease was not released")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConcurrencyUpgradeHoldsSlot: an upgraded connection (a websocket,
// say) holds its slot while the two sides are piped, and gives it back when
// the client closes.
func TestConcurrencyUpgradeHoldsSlot(t *testing.T) {
	upLn := testkit.Listen(t)
	go func() {
		for {
			c, err := upLn.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\n")
				io.Copy(c, br) // echo until the client closes
			}()
		}
	}()
	cfg := leaseConfig("http://"+upLn.Addr().String(), 1, 30*time.Second)
	g := newTestGateway(t, cfg)
	srv := startServer(t, g)
	upgrade := func() (net.Conn, int) {
		t.Helper()
		c, err := net.DialTimeout("tcp", srv.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: gw\r\nX-User: u\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		return c, resp.StatusCode
	}
	first, status := upgrade()
	if status != http.StatusSwitchingProtocols {
		t.Fatalf("first upgrade = %d, want 101", status)
	}
	second, status := upgrade()
	second.Close()
	if status != http.StatusTooManyRequests {
		t.Errorf("upgrade while another is open = %d, want 429", status)
	}
	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, status := upgrade()
		c.Close()
		if status == http.StatusSwitchingProtocols {
			break
		}
		if status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("upgrade after the first closed = %d, want 101 within 5s (lease TTL 30s)", status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConcurrencyRenewsLongRequests: a request longer than the lease TTL
// keeps its slot, renewed while it runs; once it ends the slot is free.
func TestConcurrencyRenewsLongRequests(t *testing.T) {
	up := newSlowUpstream(t)
	const ttl = time.Second
	front := httptest.NewServer(newTestGateway(t, leaseConfig(up.URL, 1, ttl)))
	defer front.Close()
	done := make(chan int, 1)
	go func() {
		status, _, _, _ := getAs(t.Context(), front.URL, "/long", "u")
		done <- status
	}()
	waitFor(t, 10*time.Second, "the long request did not reach the upstream", func() bool { return up.inflight.Load() == 1 })
	start := time.Now()
	for time.Since(start) < 4*ttl {
		status, _, _, err := getAs(t.Context(), front.URL, "/probe", "u")
		if err != nil || status != http.StatusTooManyRequests {
			t.Fatalf("probe %v into a request holding the only slot = %d (%v), want 429: the lease was not renewed", time.Since(start).Round(time.Millisecond), status, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	up.open()
	if s := <-done; s != http.StatusOK {
		t.Fatalf("long request = %d, want 200", s)
	}
	eventually200(t, front.URL, "/after")
}

// TestConcurrencyReleasedOnPanic: a final handler that panics still gives
// the request's slot back as the panic unwinds; the handler recovers the
// panic and answers 500.
func TestConcurrencyReleasedOnPanic(t *testing.T) {
	g := newTestGateway(t, leaseConfig("http://127.0.0.1:1", 1, 30*time.Second))
	serve := func(panicAt string) int {
		raw := "GET /p HTTP/1.1\r\nHost: gw.test\r\nX-User: u\r\n"
		if panicAt != "" {
			raw += panicHeader + ": " + panicAt + "\r\n"
		}
		var req fasthttp.Request
		if err := req.Read(bufio.NewReader(strings.NewReader(raw + "\r\n"))); err != nil {
			t.Fatal(err)
		}
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1}, nil)
		g.engine.Serve(&ctx)
		return ctx.Response.StatusCode()
	}
	// panichook.Hook (panics_test.go) panics in the final handler, the
	// proxy, of a request that asks for it.
	if status := serve("forward"); status != http.StatusInternalServerError {
		t.Fatalf("a request whose final handler panics = %d, want 500", status)
	}
	// The upstream is unreachable: 502 shows the limit admitted the
	// request, where a slot still held would answer 429.
	if status := serve(""); status != http.StatusBadGateway {
		t.Errorf("request after a panic = %d, want 502 (a 429 means the panicking request kept its slot)", status)
	}
}
