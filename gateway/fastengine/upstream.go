package fastengine

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/internal/panichook"
	"github.com/sluice-gw/sluice/gateway/internal/upconn"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
)

// dialTimeout bounds connecting to an upstream.
const dialTimeout = 10 * time.Second

// upstreams holds one keep-alive connection pool (a fasthttp.HostClient)
// per upstream address, shared by the routes of one gateway.
type upstreams struct {
	mu      sync.Mutex
	clients map[string]*fasthttp.HostClient
}

func newUpstreams() *upstreams {
	return &upstreams{clients: make(map[string]*fasthttp.HostClient)}
}

// client returns the pool for addr (host:port), over TLS when isTLS is
// set, with conf (nil: the default verification against the system's
// roots), which confKey names among the pools.
func (u *upstreams) client(addr string, isTLS bool, conf *tls.Config, confKey string) *fasthttp.HostClient {
	key := addr
	if isTLS {
		key = "tls " + addr + "\x00" + confKey
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if c := u.clients[key]; c != nil {
		return c
	}
	c := &fasthttp.HostClient{
		Addr:      addr,
		IsTLS:     isTLS,
		TLSConfig: conf,
		Dial:      dialUpstream,
		// The gateway's own path rules decide which paths pass; the
		// upstream gets the escaped path as received, never a cleaned one.
		DisablePathNormalizing:   true,
		NoDefaultUserAgentHeader: true,
		// A streamed response is copied to the client as it arrives.
		StreamResponseBody: true,
		MaxConns:           1 << 16,
		// A request is retried (on a fresh connection) only when a pooled
		// connection turned out closed before any of it was sent; a request
		// with a body is never retried (its body is a stream).
		MaxIdemponentCallAttempts: 2,
		MaxIdleConnDuration:       90 * time.Second,
		ReadBufferSize:            16 << 10,
	}
	u.clients[key] = c
	return c
}

// dialUpstream dials a connection of an upstream's pool, an upconn.Conn:
// it tells whether a request reached the upstream.
func dialUpstream(addr string) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return nil, err
	}
	if uc := upconn.Wrap(c); uc != nil {
		return uc, nil
	}
	return c, nil
}

// close closes every pool's idle connections.
func (u *upstreams) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.clients {
		c.CloseIdleConnections()
	}
}

// upgradeOf returns the protocol a request asks to switch to, or "": only
// an HTTP/1.1 GET with Connection: upgrade and an Upgrade other than h2c
// (which a proxy does not tunnel) takes the upgrade path. Any other request
// that carries them is proxied as an ordinary one, the two headers dropped
// as hop-by-hop.
func upgradeOf(h *fasthttp.RequestHeader) string {
	if !h.IsGet() || !h.IsHTTP11() {
		return ""
	}
	up := h.Peek("Upgrade")
	if len(up) == 0 || tokenIs(up, "h2c") {
		return ""
	}
	var listed [8]string
	for _, name := range connectionListed(listed[:0], h.PeekAll("Connection")) {
		if equalFold(name, "upgrade") {
			return string(up)
		}
	}
	return ""
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i]|0x20, b[i]|0x20
		if x != y {
			return false
		}
	}
	return true
}

// serveUpgrade forwards a request that asks to switch protocols (a
// websocket, say) over a connection of its own. When the upstream answers
// 101, the client's connection is taken from the engine and the two are
// piped both ways until either side closes; any other answer is passed on
// as usual.
func (h *proxyHandler) serveUpgrade(ctx *fasthttp.RequestCtx, x *exchange, res *httplimit.Result, protocol string) {
	start := time.Now()
	var deadline time.Time
	if h.c.timeout > 0 {
		deadline = start.Add(h.c.timeout)
	} else {
		deadline = start.Add(dialTimeout)
	}
	tg := h.pick(&x.Req, 0)
	tg.acquire()
	// The target counts the request until its answer ends, or, upgraded,
	// until the tunnel closes.
	outcome, tunnelled := core.TargetOK, false
	defer func() {
		if !tunnelled {
			tg.release(outcome)
		}
	}()
	conn, err := net.DialTimeout("tcp", tg.addr, time.Until(deadline))
	if err != nil {
		outcome = core.TargetConnFailed
		h.metrics.UpstreamDuration(h.c.route, time.Since(start))
		h.fail(ctx, x, res, upstreamFailed(err))
		return
	}
	if tg.tls {
		conf := &tls.Config{MinVersion: tls.VersionTLS12}
		if h.c.tlsConfig != nil {
			conf = h.c.tlsConfig.Clone()
		}
		if conf.ServerName == "" {
			conf.ServerName, _, _ = net.SplitHostPort(tg.addr)
		}
		conn = tls.Client(conn, conf)
	}
	out := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(out)
	// A copy: the client's request stays as it came (its connection's fate
	// included) when the upstream does not switch.
	ctx.Request.Header.CopyTo(&out.Header)
	h.outbound(ctx, x, &out.Header, protocol, tg)
	out.UseHostHeader = true
	if tg.tls {
		out.URI().SetScheme("https")
	}
	conn.SetDeadline(deadline) //nolint:errcheck // a failed deadline fails the exchange below
	bw := bufio.NewWriter(conn)
	br := bufio.NewReader(conn)
	if err = out.Write(bw); err == nil {
		err = bw.Flush()
	}
	// The answer is read into the client's response, as the proxy reads
	// one: anything but a 101 is passed on as usual, its body streamed.
	var streamed *fasthttp.Response
	if err == nil {
		streamed, err = readResponse(br, &ctx.Response, false)
	}
	h.metrics.UpstreamDuration(h.c.route, time.Since(start))
	if err == nil && streamed != nil {
		// The body streams without the route's timeout.
		err = conn.SetDeadline(time.Time{})
		if err != nil {
			streamed.CloseBodyStream() //nolint:errcheck // the connection is closed below
			fasthttp.ReleaseResponse(streamed)
		}
	}
	if err != nil {
		clearResponse(&ctx.Response)
		conn.Close()
		h.fail(ctx, x, res, upstreamFailed(err))
		return
	}
	if ctx.Response.StatusCode() != fasthttp.StatusSwitchingProtocols {
		var ub *upstreamBody
		if streamed != nil {
			ub = &upstreamBody{r: streamed.BodyStream(), resp: streamed, release: func(bool) { conn.Close() }, lease: x.takeLease()}
		} else {
			conn.Close()
		}
		h.answer(ctx, ub, res)
		return
	}
	conn.SetDeadline(time.Time{}) //nolint:errcheck // see above
	head := append([]byte(nil), ctx.Response.Header.Header()...)
	buffered, _ := br.Peek(br.Buffered())
	buffered = append([]byte(nil), buffered...)
	ctx.HijackSetNoResponse(true)
	lease := x.takeLease() // held while the connections are piped
	hdr := &ctx.Request.Header
	tunnelled = true
	ctx.Hijack(func(client net.Conn) {
		defer tg.release(core.TargetOK)
		defer lease.Release()
		defer conn.Close()
		if !h.panics.Guard(metrics.DoorGateway, func() { h.tunnel(client, conn, head, buffered, hdr) }) {
			client.Close()
		}
	})
	x.Req.SetStatus(fasthttp.StatusSwitchingProtocols)
}

// tunnel writes the upstream's 101 (head, and the bytes read past it) to
// the client, then pipes the two connections both ways until either side
// closes. A panic in a copier closes the upstream connection and ends the
// client connection's reads, so that the other copier ends too. hdr is the client's request headers, for panichook.Hook.
func (h *proxyHandler) tunnel(client, conn net.Conn, head, buffered []byte, hdr *fasthttp.RequestHeader) {
	if _, err := client.Write(head); err != nil {
		return
	}
	if _, err := client.Write(buffered); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn, point string, peek *fasthttp.RequestHeader) {
		defer func() { done <- struct{}{} }()
		ok := h.panics.Guard(metrics.DoorGateway, func() {
			if panichook.Hook != nil {
				panichook.Hook(point, peek)
			}
			io.Copy(dst, src) //nolint:errcheck // either side closing ends the pipe
			closeWrite(dst)
		})
		if !ok {
			// The engine closes the hijacked client connection once the
			// hijack handler returns (its Close does nothing before): a
			// deadline in the past ends the other copier's read of it now.
			client.SetDeadline(time.Now()) //nolint:errcheck // the connection is closed after the handler either way
			conn.Close()
		}
	}
	go pipe(conn, client, "tunnel to upstream", hookHeader(hdr))
	go pipe(client, conn, "tunnel to client", hookHeader(hdr))
	<-done
	<-done
}

// closeWrite half-closes c when it can, so the other side sees the end.
func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite() //nolint:errcheck // best effort
		return
	}
	c.Close()
}
