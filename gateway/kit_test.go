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

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/gateway/fastengine"
)

// This file is package gateway's in-package test kit (docs/layout.md, "The
// test kit"): the gateway's own tests cannot import internal/gatewaytest,
// which imports gateway, so they build and start gateways and servers here.

// newTestGateway returns a gateway for cfg, closed at t's cleanup.
func newTestGateway(t *testing.T, cfg *config.Config) *Gateway {
	t.Helper()
	g, err := New(cfg, Deps{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { g.Close() })
	return g
}

// startServer starts a Server for g (NewServer(g, nil): its own logs are
// discarded) on the listeners g's configuration names, and shuts it down at
// tb's cleanup, cutting off what still runs after 5 s. A test may shut the
// server down itself before; the cleanup's Shutdown is then harmless.
func startServer(tb testing.TB, g *Gateway) *Server {
	tb.Helper()
	srv := NewServer(g, nil)
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

// testEngines are the loopback public listeners of the gateways tests
// serve through ServeHTTP, one per gateway.
var testEngines sync.Map // *Gateway -> *peerListener

// ServeHTTP serves r through g's public handler on the fasthttp engine, as
// the public listener does, over a loopback connection whose peer the
// gateway sees as r.RemoteAddr: the request-target goes as r.URL holds it,
// the body is streamed (cut off, with the write side closed, when reading
// it fails), and the answer is copied to w as it arrives, each read
// flushed. It lets the tests use g as an http.Handler
// (httptest.NewServer(g), g.ServeHTTP(rec, req)).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ln := g.testListener()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		http.Error(w, "test engine: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer c.Close()
	peer := netip.MustParseAddrPort("192.0.2.1:1234")
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		peer = ap
	}
	ln.peers.Store(c.LocalAddr().String(), peer)
	defer ln.peers.Delete(c.LocalAddr().String())
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
	peers sync.Map // client address -> netip.AddrPort
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

// testListener returns the listener g's test engine serves on, starting it
// on first use. ServeHTTP, which calls it, has no test to tie the listener
// to (testkit.Listen closes its listener at a test's cleanup), so this one
// listener comes from net.Listen and lives as long as the test binary.
func (g *Gateway) testListener() *peerListener {
	if ln, ok := testEngines.Load(g); ok {
		return ln.(*peerListener)
	}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic("test engine: " + err.Error())
	}
	ln := &peerListener{Listener: tcp}
	if prev, loaded := testEngines.LoadOrStore(g, ln); loaded {
		tcp.Close()
		return prev.(*peerListener)
	}
	srv := fastengine.NewServer(g.cfg.Server, func() (*fastengine.Handler, func()) { return g.engine, func() {} },
		fastengine.ServerOptions{Log: g.log, Metrics: g.metrics, Panics: g.panics})
	go srv.Serve(ln) //nolint:errcheck // ends when the listener closes
	return ln
}
