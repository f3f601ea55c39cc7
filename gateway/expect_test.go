package gateway

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestExpectRefusalSameAnswer checks that a request with Expect:
// 100-continue is decided once, before 100 Continue: admitted, it counts
// once; refused, it gets the answer the same request gets without Expect
// (status, rate-limit headers, body), and its connection is closed. Every
// request leaves the gateway's in-flight count.
func TestExpectRefusalSameAnswer(t *testing.T) {
	g := newTestGateway(t, testConfig(limitedRoute("up", "/up", "ok")))
	srv, _, _ := startServerURLs(t, g)
	// exchange sends raw (and body after a 100 Continue) on a connection
	// of its own and returns the final answer, its body and, when
	// checkClose, whether the gateway closed the connection after it.
	continued := false
	exchange := func(raw string, body string, checkClose bool) (*http.Response, string, bool) {
		t.Helper()
		c, err := net.Dial("tcp", srv.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		io.WriteString(c, raw)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode == http.StatusContinue {
			continued = true
			io.WriteString(c, body)
			if resp, err = http.ReadResponse(br, nil); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := io.ReadAll(resp.Body)
		if !checkClose {
			return resp, string(b), false
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		_, err = br.ReadByte()
		var ne net.Error
		return resp, string(b), err != nil && !(errors.As(err, &ne) && ne.Timeout())
	}
	// The seconds to wait may tick between two answers.
	seconds := regexp.MustCompile(`[0-9]+`)
	plain := "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
	expect := "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
	if resp, body, _ := exchange(expect, "hello", false); resp.StatusCode != 200 || body != "ok" || resp.Header.Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("admitted with Expect: %d %q remaining %q, want 200 ok, 2 left", resp.StatusCode, body, resp.Header.Get("X-RateLimit-Remaining"))
	}
	exchange(plain, "", false)
	exchange(plain, "", false)
	want, wantBody, _ := exchange(plain, "", false)
	continued = false
	got, gotBody, closed := exchange(expect, "hello", true)
	if continued {
		t.Error("the refused request with Expect got 100 Continue first")
	}
	if want.StatusCode != 429 || got.StatusCode != want.StatusCode || !closed ||
		seconds.ReplaceAllString(gotBody, "N") != seconds.ReplaceAllString(wantBody, "N") {
		t.Errorf("refused with Expect: %d %q (closed %v); without: %d %q; want the same 429, closing", got.StatusCode, gotBody, closed, want.StatusCode, wantBody)
	}
	for _, h := range []http.Header{want.Header, got.Header} {
		h.Del("Date")
		h.Del("Connection")
		for _, name := range []string{"Retry-After", "Ratelimit", "X-Ratelimit-Reset"} {
			if v := h.Get(name); v != "" {
				h.Set(name, seconds.ReplaceAllString(v, "N"))
			}
		}
	}
	if diff := cmp.Diff(want.Header, got.Header); diff != "" {
		t.Errorf("headers with Expect (+) and without (-):\n%s", diff)
	}
	deadline := time.Now().Add(5 * time.Second)
	for g.inflight.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the engine ends the request after the answer
	}
	if n := g.inflight.Load(); n != 0 {
		t.Errorf("in-flight requests = %d after every answer, want 0", n)
	}
}
