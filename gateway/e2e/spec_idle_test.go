package e2e

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestSpecIdleTimeout: server.idle_timeout closes a keep-alive connection
// that carries no request for that long, not earlier; a request sent before
// then is served on the same connection.
func TestSpecIdleTimeout(t *testing.T) {
	t.Parallel()
	const idle = 500 * time.Millisecond
	p := start(t, `
server: {listen: "127.0.0.1:0", shutdown_timeout: 10s, idle_timeout: 500ms}
admin: {listen: "127.0.0.1:0"}
routes:
  - id: hello
    match: {path: /hello}
    respond: {body: "hello\n"}
`)
	c, err := net.DialTimeout("tcp", hostAddr(p.base), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	var answered time.Time
	for i := range 2 {
		if _, err := io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatalf("request %d on the kept-alive connection: %v", i+1, err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered = time.Now()
		if resp.StatusCode != 200 || resp.Close {
			t.Fatalf("response %d: %d, close %v; want 200 on a kept-alive connection", i+1, resp.StatusCode, resp.Close)
		}
	}
	// The gateway starts its idle clock once it has written the answer, a
	// little before the client has read it: allow that much early.
	c.SetReadDeadline(time.Now().Add(10 * idle))
	n, err := br.Read(make([]byte, 1))
	open := time.Since(answered)
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatalf("the idle connection was still open after %v, want it closed after about %v", open, idle)
	case err == nil:
		t.Fatalf("read %d unexpected bytes from an idle connection", n)
	case !errors.Is(err, io.EOF) && !isReset(err):
		t.Fatalf("reading from the idle connection: %v", err)
	}
	t.Logf("idle connection closed %v after the last answer (idle_timeout %v)", open, idle)
	if open < idle-200*time.Millisecond {
		t.Errorf("the idle connection was closed after %v, before idle_timeout %v", open, idle)
	}
}
