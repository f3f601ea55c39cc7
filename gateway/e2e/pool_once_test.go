package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testkit"
)

// TestPoolReceivedOnce: a request without a body that reached a pool's
// target, which read it and closed the connection without answering, is
// answered 502 and is not sent again, whatever its method (GET, HEAD and
// OPTIONS too): not on another connection to the target, not to another
// target. The target receives each exactly once, through the fast engine
// (HTTP/1.1) and the HTTP/2 engine (h2c) (docs/operations.md, "Upstream
// pools").
func TestPoolReceivedOnce(t *testing.T) {
	var got atomic.Int64
	addr := testkit.ServeConns(t, func(c net.Conn) {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
			got.Add(1)
		}
		// closed without an answer
	})
	for _, h2c := range []bool{false, true} {
		on := "false"
		if h2c {
			on = "true"
		}
		p := start(t, `server: {listen: "127.0.0.1:0", http2: {h2c: `+on+`}}
admin: {listen: "127.0.0.1:0"}
store: {type: memory}
routes:
  - id: one
    match: {path: /**}
    pool: {targets: [http://`+addr+`], retries: 1, passive: {failures: 0}}
`)
		tr := &http.Transport{}
		if h2c {
			tr.Protocols = new(http.Protocols)
			tr.Protocols.SetUnencryptedHTTP2(true)
		}
		cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		for _, method := range []string{"DELETE", "POST", "PATCH", "GET", "HEAD", "OPTIONS"} {
			before := got.Load()
			req, err := http.NewRequest(method, p.base+"/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatalf("h2c %v: %s: %v", h2c, method, err)
			}
			resp.Body.Close()
			n := got.Load() - before
			if resp.StatusCode != http.StatusBadGateway || n != 1 {
				t.Errorf("h2c %v: %s answered %d (%s), the target received it %d times; want 502, received once", h2c, method, resp.StatusCode, resp.Proto, n)
			}
		}
		tr.CloseIdleConnections()
	}
}

// TestPoolStaleConnections: a target killed while sluice holds several
// idle connections to it costs no request a 502: a GET that goes out on
// one of those connections (closed by the kill) reaches nothing, so it is
// sent again, at the latest on a new connection, which is refused, and
// the GET is tried on the other target (docs/operations.md, "Upstream
// pools"). No byte of a GET reaches the killed target: the kill finds
// every connection idle and empty, and none is read after it.
func TestPoolStaleConnections(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			dead, live := newPoolUpstream(t), newPoolUpstream(t)
			server := `server: {listen: "127.0.0.1:0"}`
			tr := &http.Transport{MaxIdleConnsPerHost: 16}
			if proto == "h2c" {
				server = `server: {listen: "127.0.0.1:0", http2: {h2c: true}}`
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetUnencryptedHTTP2(true)
			}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			p := start(t, server+`
admin: {listen: "127.0.0.1:0"}
store: {type: memory}
routes:
  - id: pool
    match: {path: /**}
    pool:
      targets: [`+dead.url()+`, `+live.url()+`]
      retries: 1
      passive: {failures: 0}
`)
			warmPool(t, cl, p.base+"/warm")
			dead.mu.Lock()
			open := len(dead.conns)
			dead.mu.Unlock()
			if open < 2 {
				t.Fatalf("sluice holds %d connections to the target, want at least 2 for the test", open)
			}
			// Answered, a connection is marked idle just after its answer went
			// out: wait for the marks.
			if !waitFor(5*time.Second, func() bool { return dead.busyConns() == 0 }) {
				t.Fatalf("%d connections to the target still busy 5s after the last answer", dead.busyConns())
			}
			held := dead.kill()
			if h := held(); h != 0 {
				t.Fatalf("the killed target had %d requests unanswered, want none: the test needs every connection to it idle", h)
			}
			for i := range 6 {
				resp, err := cl.Get(p.base + "/after")
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET %d after the kill (with %d idle connections to the killed target): %d, want 200 from the other target", i, open, resp.StatusCode)
				}
			}
			if h := held(); h != 0 {
				t.Errorf("a byte of %d GETs reached the killed target after the kill, want none", h)
			}
		})
	}
}

// TestPoolDyingTarget: a target going away (its listener closed, each of
// its kept-alive connections closed as the next request arrives on it,
// read and unanswered) while sluice holds several idle connections to it:
// a GET the target read is answered 502 and reaches no other target; a
// GET it did not read (once sluice's connections to it are used up, a new
// one is refused) is answered 200 by the other target. So the number of
// 502s is the number of GETs the dying target read, and no GET reaches
// both targets (docs/operations.md, "Upstream pools").
func TestPoolDyingTarget(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			var dying atomic.Bool
			var conns, closedUnanswered atomic.Int64
			var mu sync.Mutex
			readDying := map[string]int{} // X-Request-Seq read while dying
			ln := testkit.Listen(t)
			var wg sync.WaitGroup
			t.Cleanup(wg.Wait)
			t.Cleanup(func() { ln.Close() })
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					conns.Add(1)
					wg.Add(1)
					go func() {
						defer wg.Done()
						defer c.Close()
						br := bufio.NewReader(c)
						for {
							c.SetDeadline(time.Now().Add(20 * time.Second))
							req, err := http.ReadRequest(br)
							if err != nil {
								return
							}
							io.Copy(io.Discard, req.Body)
							if dying.Load() {
								mu.Lock()
								readDying[req.Header.Get("X-Request-Seq")]++
								mu.Unlock()
								closedUnanswered.Add(1)
								return
							}
							time.Sleep(3 * time.Millisecond)
							if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\ndying"); err != nil {
								return
							}
						}
					}()
				}
			}()
			live := newPoolUpstream(t)
			server := `server: {listen: "127.0.0.1:0"}`
			tr := &http.Transport{MaxIdleConnsPerHost: 16}
			if proto == "h2c" {
				server = `server: {listen: "127.0.0.1:0", http2: {h2c: true}}`
				tr.Protocols = new(http.Protocols)
				tr.Protocols.SetUnencryptedHTTP2(true)
			}
			defer tr.CloseIdleConnections()
			cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			p := start(t, server+`
admin: {listen: "127.0.0.1:0"}
store: {type: memory}
routes:
  - id: pool
    match: {path: /**}
    pool:
      targets: [http://`+ln.Addr().String()+`, `+live.url()+`]
      retries: 1
      passive: {failures: 0}
`)
			warmPool(t, cl, p.base+"/warm")
			opened := conns.Load()
			if opened < 3 {
				t.Fatalf("sluice opened %d connections to the target, want at least 3 for the test", opened)
			}
			dying.Store(true)
			ln.Close()
			// Taken in turn, every second GET goes to the dying target: enough
			// GETs that each connection sluice holds to it carries one, and
			// the last few find none and are refused.
			n := 2*int(opened) + 4
			codes := make([]int, n)
			for i := range n {
				req, err := http.NewRequest(http.MethodGet, p.base+"/after", nil)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Request-Seq", "after-"+strconv.Itoa(i))
				resp, err := cl.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				codes[i] = resp.StatusCode
			}
			atLive := live.reached()
			mu.Lock()
			defer mu.Unlock()
			bad, answered502 := 0, 0
			for i, code := range codes {
				id := "after-" + strconv.Itoa(i)
				if code == http.StatusBadGateway {
					answered502++
				}
				d, l := readDying[id], atLive[id]
				ok := d == 1 && l == 0 && code == http.StatusBadGateway || // read, not sent again
					d == 0 && l == 1 && code == http.StatusOK // never read by the dying target
				if !ok {
					bad++
					if bad <= 10 {
						t.Errorf("GET %d while the target goes away: %d; the dying target read it %d times, the live one %d; want 502 and the live one none when the dying one read it (once), else 200 from the live one (once)", i, code, d, l)
					}
				}
			}
			if got := closedUnanswered.Load(); int64(answered502) != got {
				t.Errorf("%d GETs answered 502, want %d: those the dying target read and closed unanswered (answers %v)", answered502, got, codes)
			}
			if closedUnanswered.Load() == 0 {
				t.Errorf("the dying target read none of the %d GETs (sluice had opened %d connections to it): the test did not exercise a request read and closed unanswered", n, opened)
			}
			t.Logf("%d GETs; the dying target read and closed %d unanswered (sluice had opened %d connections to it); answers %v", n, closedUnanswered.Load(), opened, codes)
		})
	}
}

// warmPool sends five rounds of eight concurrent GETs to url: they open
// several connections to each target of the pool, which sluice keeps idle
// once answered.
func warmPool(t *testing.T, cl *http.Client, url string) {
	t.Helper()
	for range 5 {
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := cl.Get(url)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}()
		}
		wg.Wait()
	}
}
