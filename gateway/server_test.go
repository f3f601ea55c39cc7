package gateway

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/httplimit"
)

func limitedRoute(id, path, body string) config.Route {
	return config.Route{ID: id, Match: config.Match{Path: path}, Respond: &config.Respond{Status: 200, Body: body},
		Limits: []config.Limit{{Policy: "three", Key: httplimit.Key{{Source: httplimit.SourceConst, Name: "all"}}, Cost: 1, OnEmptyKey: httplimit.EmptyKeyDeny}}}
}

// startServerURLs starts a Server for g (startServer) and returns it with
// the base URLs of its public and admin listeners.
func startServerURLs(t *testing.T, g *Gateway) (*Server, string, string) {
	t.Helper()
	srv := startServer(t, g)
	return srv, "http://" + srv.Addr().String(), "http://" + srv.AdminAddr().String()
}

func get(t *testing.T, url string, header ...string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestLimitsMetricsAndAdmin(t *testing.T) {
	var contacted atomic.Int64
	up := httptestServer(t, func(w http.ResponseWriter, r *http.Request) { contacted.Add(1) })
	proxied := upstreamRoute("proxied", "/up", up)
	proxied.Limits = limitedRoute("", "", "").Limits
	cfg := testConfig(limitedRoute("hello", "/hello", "hi\n"), proxied)
	cfg.Admin.Token = "s3cret"
	_, base, admin := startServerURLs(t, newTestGateway(t, cfg))

	for i, want := range []int{200, 200, 200, 429, 429} {
		if code, _, _ := get(t, base+"/hello"); code != want {
			t.Errorf("request %d to /hello = %d, want %d", i+1, code, want)
		}
	}
	for i := range 5 {
		get(t, base+"/up")
		if want := int64(min(i+1, 3)); contacted.Load() != want {
			t.Errorf("after %d requests the upstream saw %d, want %d (never on 429)", i+1, contacted.Load(), want)
		}
	}
	get(t, base+"/none")

	if code, body, _ := get(t, admin+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _, _ := get(t, admin+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d, want 200", code)
	}
	_, metrics, _ := get(t, admin+"/metrics")
	for _, want := range []string{
		`sluice_requests_total{code="200",route="hello"} 3`,
		`sluice_requests_total{code="429",route="hello"} 2`,
		`sluice_requests_total{code="404",route=""} 1`,
		`sluice_decisions_total{policy="three",result="allowed",route="hello"} 3`,
		`sluice_decisions_total{policy="three",result="denied",route="hello"} 2`,
		`sluice_decisions_total{policy="three",result="denied",route="proxied"} 2`,
		`sluice_upstream_duration_seconds_count{route="proxied"} 3`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if code, _, h := get(t, admin+"/admin/"); code != 401 || h.Get("WWW-Authenticate") != `Basic realm="sluice"` {
		t.Errorf("/admin/ without token = %d %v, want 401 with WWW-Authenticate", code, h)
	}
	if code, _, _ := get(t, admin+"/admin/", "Authorization", "Bearer s3cret"); code != 200 {
		t.Errorf("/admin/ with token = %d, want 200 (the dashboard)", code)
	}
}

func TestSwapKeepsBudgetAndFinishesInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	up := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		w.Write([]byte("slow done"))
	})
	cfg1 := testConfig(limitedRoute("hello", "/hello", "one\n"), upstreamRoute("slow", "/slow", up))
	g1 := newTestGateway(t, cfg1)
	srv, base, _ := startServerURLs(t, g1)

	for range 2 {
		if code, body, _ := get(t, base+"/hello"); code != 200 || body != "one\n" {
			t.Fatalf("before reload: %d %q", code, body)
		}
	}
	slow := make(chan string)
	go func() { _, body, _ := get(t, base+"/slow"); slow <- body }()
	<-entered

	cfg2 := testConfig(limitedRoute("hello", "/hello", "two\n"), upstreamRoute("slow", "/slow", up))
	g2, err := New(cfg2, Deps{Registry: g1.Registry(), Previous: g1})
	if err != nil {
		t.Fatal(err)
	}
	srv.Swap(g2)
	if code, body, _ := get(t, base+"/hello"); code != 200 || body != "two\n" {
		t.Errorf("after reload: %d %q, want 200 \"two\\n\" (third of three)", code, body)
	}
	if code, _, _ := get(t, base+"/hello"); code != 429 {
		t.Errorf("fourth request over the reload = %d, want 429: a reload must keep the budget", code)
	}
	if g1.closed.Load() {
		t.Error("old gateway closed while a request was still in flight")
	}
	close(release)
	if body := <-slow; body != "slow done" {
		t.Errorf("in-flight request across the reload = %q, want \"slow done\"", body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !g1.closed.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // waiting for the retire goroutine, bounded
	}
	if !g1.closed.Load() {
		t.Error("old gateway not closed after its last request")
	}
	if code, _, _ := get(t, base+"/hello"); code != 429 {
		t.Errorf("after the old gateway closed, the shared store answered %d, want 429", code)
	}
}

func TestShutdownDrainsInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	up := httptestServer(t, func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		w.Write([]byte("finished"))
	})
	g := newTestGateway(t, testConfig(upstreamRoute("slow", "/slow", up)))
	srv := startServer(t, g)
	base := "http://" + srv.Addr().String()
	slow := make(chan string)
	go func() { _, body, _ := get(t, base+"/slow"); slow <- body }()
	<-entered
	done := make(chan error)
	go func() { done <- srv.Shutdown(context.Background()) }()
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v before the in-flight request finished", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if body := <-slow; body != "finished" {
		t.Errorf("in-flight request = %q, want \"finished\"", body)
	}
	if err := <-done; err != nil {
		t.Errorf("Shutdown = %v", err)
	}
}

func httptestServer(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	up := httptest.NewServer(h)
	t.Cleanup(up.Close)
	return up.URL
}
