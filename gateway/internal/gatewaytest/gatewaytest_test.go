package gatewaytest

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
)

// fakeTB is a testing.TB whose cleanups run when the test calls cleanup,
// so that the test sees what the kit does at cleanup.
type fakeTB struct {
	testing.TB
	cleanups []func()
}

func (f *fakeTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func (f *fakeTB) cleanup() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}

// upstream answers "up PATH" and counts the connections it has seen
// closed.
type upstream struct {
	*httptest.Server
	closed atomic.Int32
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{}
	u.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "up "+r.URL.Path) //nolint:errcheck // the client checks the body
	}))
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			u.closed.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// waitClosed waits until u has seen n connections closed.
func (u *upstream) waitClosed(t *testing.T, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for u.closed.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the upstream saw %d connections closed, want %d", u.closed.Load(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func testConfig(t *testing.T, upstreamURL string) *config.Config {
	t.Helper()
	cfg, err := config.Parse("gatewaytest.yaml", []byte(fmt.Sprintf(`server: {listen: "127.0.0.1:0"}
admin: {listen: "127.0.0.1:0"}
store: {type: memory}
routes:
  - id: all
    match: {path: /**}
    upstream: %s
`, upstreamURL)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestNew: cleanup closes the gateway New returns, which closes its
// upstream connections kept alive, while the Server serving it (with
// cleanups of its own) still runs.
func TestNew(t *testing.T) {
	up := newUpstream(t)
	fNew, fStart := &fakeTB{TB: t}, &fakeTB{TB: t}
	defer fStart.cleanup()
	srv := Start(fStart, New(fNew, testConfig(t, up.URL), gateway.Deps{}))
	if code, body := get(t, "http://"+srv.Addr().String()+"/a"); code != http.StatusOK || body != "up /a" {
		t.Fatalf("GET /a through the gateway = %d %q, want 200 %q", code, body, "up /a")
	}
	time.Sleep(100 * time.Millisecond)
	if n := up.closed.Load(); n != 0 {
		t.Fatalf("the upstream saw %d connections closed before cleanup", n)
	}
	fNew.cleanup()
	up.waitClosed(t, 1)
}

// TestStart: the Server Start returns serves the public and admin
// listeners on the bound loopback addresses; cleanup shuts it down (both
// addresses refuse connections, and the gateway's upstream connections are
// closed).
func TestStart(t *testing.T) {
	up := newUpstream(t)
	f := &fakeTB{TB: t}
	srv := Start(f, New(f, testConfig(t, up.URL), gateway.Deps{}))
	if code, body := get(t, "http://"+srv.Addr().String()+"/b"); code != http.StatusOK || body != "up /b" {
		t.Errorf("GET /b on the public listener = %d %q, want 200 %q", code, body, "up /b")
	}
	if code, _ := get(t, "http://"+srv.AdminAddr().String()+"/healthz"); code != http.StatusOK {
		t.Errorf("GET /healthz on the admin listener = %d, want 200", code)
	}
	http.DefaultClient.CloseIdleConnections()
	f.cleanup()
	for _, addr := range []net.Addr{srv.Addr(), srv.AdminAddr()} {
		if c, err := net.DialTimeout("tcp", addr.String(), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("%s accepts connections after cleanup", addr)
		}
	}
	up.waitClosed(t, 1)
}
