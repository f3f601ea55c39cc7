package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/internal/testkit"
)

// TestPoolReceivedOnce: a request without a body that reached a pool's
// target, which closed the connection without answering, is answered 502
// and is not sent again unless it is a GET, HEAD or OPTIONS. Those may be
// sent again on other connections, at the latest on a new one (a
// kept-alive connection the target closed as the request went out looks
// the same): the fast engine (HTTP/1.1) sends one at most three times in
// all, once more on a pooled connection and once on a new one; the HTTP/2
// engine's transport (h2c here) sends one again only after a failure on a
// reused connection (docs/operations.md, "Upstream pools").
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
		for _, tc := range []struct {
			method string
			max    int64
		}{{"DELETE", 1}, {"POST", 1}, {"PATCH", 1}, {"GET", 3}, {"HEAD", 3}, {"OPTIONS", 3}} {
			before := got.Load()
			req, err := http.NewRequest(tc.method, p.base+"/x", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatalf("h2c %v: %s: %v", h2c, tc.method, err)
			}
			resp.Body.Close()
			n := got.Load() - before
			if resp.StatusCode != http.StatusBadGateway || n < 1 || n > tc.max {
				t.Errorf("h2c %v: %s answered %d (%s), the target received it %d times; want 502, received 1 to %d times", h2c, tc.method, resp.StatusCode, resp.Proto, n, tc.max)
			}
		}
		tr.CloseIdleConnections()
	}
}

// TestPoolStaleConnections: a target killed while sluice holds several
// idle connections to it costs no request a 502: a GET sent on one of
// those connections (closed by the kill) is not sent on another of them,
// also closed, but on a new connection, which is refused, so the GET is
// tried on the other target (docs/operations.md, "Upstream pools").
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
			// Concurrent requests open several connections to each target,
			// which sluice keeps idle once answered.
			for range 5 {
				var wg sync.WaitGroup
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := cl.Get(p.base + "/warm")
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
			dead.mu.Lock()
			open := len(dead.conns)
			dead.mu.Unlock()
			if open < 2 {
				t.Fatalf("sluice holds %d connections to the target, want at least 2 for the test", open)
			}
			dead.kill()
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
		})
	}
}

// TestPoolDyingTarget: a target going away (its listener closed, each of
// its kept-alive connections closed as the next request arrives on it,
// unanswered) costs no GET a 502 while sluice holds several idle
// connections to it: once a GET failed on two of them, it goes on a new
// connection, which is refused, and is tried on the other target.
func TestPoolDyingTarget(t *testing.T) {
	for _, proto := range []string{"http1", "h2c"} {
		t.Run(proto, func(t *testing.T) {
			var dying atomic.Bool
			var conns, closedUnanswered atomic.Int64
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
			for range 5 {
				var wg sync.WaitGroup
				for range 8 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						resp, err := cl.Get(p.base + "/warm")
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
			if n := conns.Load(); n < 3 {
				t.Fatalf("sluice opened %d connections to the target, want at least 3 for the test", n)
			}
			dying.Store(true)
			ln.Close()
			for i := range 6 {
				resp, err := cl.Get(p.base + "/after")
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET %d while the target goes away (%d connections to it): %d, want 200 from the other target", i, conns.Load(), resp.StatusCode)
				}
			}
			t.Logf("requests the dying target received and closed unanswered: %d", closedUnanswered.Load())
		})
	}
}
