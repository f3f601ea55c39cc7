package fastengine

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// closer records that the engine closed it: done is closed then.
type closer struct {
	once sync.Once
	done chan struct{}
}

func newCloser() *closer { return &closer{done: make(chan struct{})} }

func (c *closer) Close() error { c.once.Do(func() { close(c.done) }); return nil }

// TestExpectEngine pins what Handler.Expect relies on in the engine (the
// public server, built by serveEngine), so that a fasthttp upgrade that
// changes it fails here:
// ExpectHandler runs before 100 Continue is sent; when it returns another
// status, the response it wrote (status, headers, body) is the answer, the
// handler is not called and the connection is closed; when it returns 100,
// the engine sends 100 Continue, then calls the handler, which sees the user
// values ExpectHandler set; and a user value that is an io.Closer is closed
// when the request ends.
func TestExpectEngine(t *testing.T) {
	var handled atomic.Int32
	var kept *closer
	addr := serveEngine(t, func(ctx *fasthttp.RequestCtx) {
		handled.Add(1)
		if ctx.UserValue(pendingKey{}) != kept {
			t.Error("the handler does not see the user value ExpectHandler set")
		}
		body, _ := io.ReadAll(ctx.RequestBodyStream())
		ctx.SetBodyString("got " + string(body))
	}, func(ctx *fasthttp.RequestCtx) int {
		if string(ctx.Path()) == "/refuse" {
			ctx.Response.Header.Set("X-Quota", "0")
			ctx.Response.Header.SetContentType("application/problem+json")
			ctx.Response.SetStatusCode(http.StatusTooManyRequests)
			ctx.Response.SetBodyString(`{"status":429}`)
			return http.StatusTooManyRequests
		}
		kept = newCloser()
		ctx.SetUserValue(pendingKey{}, kept)
		return fasthttp.StatusContinue
	}, config.Server{}, ServerOptions{})
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, bufio.NewReader(c)
	}

	c, br := dial()
	defer c.Close()
	io.WriteString(c, "POST /refuse HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\nExpect: 100-continue\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || resp.Header.Get("X-Quota") != "0" || resp.Header.Get("Content-Type") != "application/problem+json" ||
		string(body) != `{"status":429}` || !resp.Close {
		t.Errorf("refused: %d %v %q (close %v), want the 429 ExpectHandler wrote, closing", resp.StatusCode, resp.Header, body, resp.Close)
	}
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection stays open after a refusal")
	}
	if handled.Load() != 0 {
		t.Error("the handler ran for a refused request")
	}

	c2, br2 := dial()
	defer c2.Close()
	io.WriteString(c2, "POST /admit HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	line, err := br2.ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 ") {
		t.Fatalf("admitted: first line %q, %v; want 100 Continue", line, err)
	}
	br2.ReadString('\n')
	io.WriteString(c2, "hello")
	resp, err = http.ReadResponse(br2, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "got hello" {
		t.Errorf("admitted: %d %q, want 200 and the body", resp.StatusCode, body)
	}
	// The engine closes the user values once it is done with the
	// request, which may be after the client has read the answer: wait
	// for it, bounded.
	select {
	case <-kept.done:
	case <-time.After(5 * time.Second):
		t.Error("the user value set by ExpectHandler was not closed when the request ended")
	}
}

func TestHeaderBytesCountsRequestLineAndHeaders(t *testing.T) {
	got := make(chan int, 1)
	hs := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) { got <- headerBytes(&ctx.Request.Header) }}
	addr := testkit.Serve(t, hs.Serve)
	defer hs.Shutdown()
	raw := "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nX-One: 1\r\nUser-Agent: t\r\n\r\n"
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(raw))
	if n := <-got; n != len(raw) {
		t.Errorf("headerBytes = %d, want %d (the bytes sent)", n, len(raw))
	}
}
