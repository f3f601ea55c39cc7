package gateway

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/fastengine"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// This file is package gateway's in-package test kit (docs/layout.md, "The
// test kit"): the gateway's own tests cannot import internal/gatewaytest,
// which imports gateway, so they build and start gateways and servers here.

// newTestGateway returns a gateway for cfg with its test engine
// (serveTestEngine), both closed at t's cleanup.
func newTestGateway(t *testing.T, cfg *config.Config) *Gateway {
	t.Helper()
	g, err := New(cfg, Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	serveTestEngine(t, g)
	return g
}

// startServer starts a Server for g (NewServer(g, nil): its own logs are
// discarded) on the listeners g's configuration names, and shuts it down at
// tb's cleanup, cutting off what still runs after 5 s. A test may shut the
// server down itself before; the cleanup's Shutdown is then harmless.
func startServer(tb testing.TB, g *Gateway) *Server {
	tb.Helper()
	srv, err := NewServer(g, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx) //nolint:errcheck // the test is over
	})
	return srv
}

// testEngines are the test engines of the gateways tests serve through
// ServeHTTP, one per gateway.
var testEngines sync.Map // *Gateway -> *testEngine

// testEngine is a gateway's public server on the fasthttp engine, serving
// on a loopback listener whose connections report the peers ServeHTTP
// gives them.
type testEngine struct {
	addr  string   // the listener's address
	peers sync.Map // client address -> netip.AddrPort
}

// serveTestEngine starts g's test engine, through which ServeHTTP serves
// g: the public server of the fasthttp engine (fastengine.NewServer, with
// g's server section, logger, metrics and panics), on a loopback listener
// from testkit. At tb's cleanup the listener closes and ServeHTTP no longer
// serves g. A test that builds a gateway with New rather than
// newTestGateway calls it before serving the gateway through ServeHTTP.
func serveTestEngine(tb testing.TB, g *Gateway) {
	tb.Helper()
	e := &testEngine{}
	srv := fastengine.NewServer(g.cfg.Server, func() (*fastengine.Handler, func()) { return g.engine, func() {} },
		fastengine.ServerOptions{Log: g.log, Metrics: g.metrics, Panics: g.panics})
	e.addr = testkit.Serve(tb, func(ln net.Listener) error {
		return srv.Serve(&peerListener{Listener: ln, peers: &e.peers})
	})
	if _, loaded := testEngines.LoadOrStore(g, e); loaded {
		tb.Fatal("test engine: the gateway has one already")
	}
	tb.Cleanup(func() { testEngines.Delete(g) })
}

// ServeHTTP serves r through g's public handler on the fasthttp engine, as
// the public listener does, over a loopback connection whose peer the
// gateway sees as r.RemoteAddr: the request-target goes as r.URL holds it,
// the body is streamed (cut off, with the write side closed, when reading
// it fails), and the answer is copied to w as it arrives, each read
// flushed. It lets the tests use g as an http.Handler
// (httptest.NewServer(g), g.ServeHTTP(rec, req)) while g's test engine
// serves (serveTestEngine); without one it answers 500.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v, ok := testEngines.Load(g)
	if !ok {
		http.Error(w, "test engine: none serves this gateway (newTestGateway or serveTestEngine starts it)", http.StatusInternalServerError)
		return
	}
	e := v.(*testEngine)
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		http.Error(w, "test engine: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer c.Close()
	peer := netip.MustParseAddrPort("192.0.2.1:1234")
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		peer = ap
	}
	e.peers.Store(c.LocalAddr().String(), peer)
	defer e.peers.Delete(c.LocalAddr().String())
	stop := context.AfterFunc(r.Context(), func() { c.Close() }) // the client leaves
	defer stop()
	go writeTestRequest(c.(*net.TCPConn), r)
	resp, err := http.ReadResponse(bufio.NewReader(c), r)
	if err != nil {
		http.Error(w, "test engine: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			http.NewResponseController(w).Flush() //nolint:errcheck // a recorder may not flush
		}
		if err != nil {
			return
		}
	}
}

// writeTestRequest writes r on c in HTTP/1.1 form, the headers first, then the
// body as it can be read: with r.ContentLength, or chunked when that is
// unknown. A body that fails to read half-closes c where it broke off.
func writeTestRequest(c *net.TCPConn, r *http.Request) {
	bw := bufio.NewWriter(c)
	fmt.Fprintf(bw, "%s %s HTTP/1.1\r\nHost: %s\r\n", r.Method, r.URL.RequestURI(), r.Host)
	r.Header.WriteSubset(bw, map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true}) //nolint:errcheck // see Flush
	body := r.Body
	switch {
	case body == nil || body == http.NoBody:
		body = nil
		if r.ContentLength > 0 {
			fmt.Fprintf(bw, "Content-Length: %d\r\n", r.ContentLength)
		}
	case r.ContentLength > 0:
		fmt.Fprintf(bw, "Content-Length: %d\r\n", r.ContentLength)
	default:
		bw.WriteString("Transfer-Encoding: chunked\r\n")
	}
	bw.WriteString("\r\n")
	if bw.Flush() != nil || body == nil {
		return
	}
	var dst io.Writer = c
	var cw io.WriteCloser
	if r.ContentLength <= 0 {
		cw = httputil.NewChunkedWriter(c)
		dst = cw
	}
	if _, err := io.Copy(dst, body); err != nil {
		c.CloseWrite() //nolint:errcheck // the body broke off
		return
	}
	if cw != nil {
		cw.Close()
		io.WriteString(c, "\r\n") //nolint:errcheck // a failed write shows in the answer
	}
}

// peerListener is a loopback listener whose connections report the peer
// the test gave for them (ServeHTTP registers it by the client's address).
type peerListener struct {
	net.Listener
	peers *sync.Map // client address -> netip.AddrPort
}

func (l *peerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &peerConn{Conn: c, l: l}, nil
}

// peerConn reports the registered peer as its remote address.
type peerConn struct {
	net.Conn
	l *peerListener
}

func (c *peerConn) RemoteAddr() net.Addr {
	if p, ok := c.l.peers.Load(c.Conn.RemoteAddr().String()); ok {
		return net.TCPAddrFromAddrPort(p.(netip.AddrPort))
	}
	return c.Conn.RemoteAddr()
}
