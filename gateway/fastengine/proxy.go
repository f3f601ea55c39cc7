package fastengine

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/internal/panichook"
	"github.com/sluice-gw/sluice/gateway/internal/tracing"
	"github.com/sluice-gw/sluice/gateway/internal/upconn"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
)

// statusClientClosed is recorded when the client leaves before the upstream answers.
const statusClientClosed = core.StatusClientClosed

// proxyError is a failure of a proxied request together with the status
// it is answered with, in the manner of caddy's HandlerError: the upstream
// round trip and the request body's reader return one, and the proxy
// renders it, the one place a proxy failure gets its answer.
type proxyError struct {
	Status int    // the answer's status
	Detail string // the problem's detail, for the client
	Log    string // the log message; a 5xx is logged at warn, anything else at debug
	Err    error  // the cause, for the log; may be nil
}

func (e *proxyError) Error() string {
	if e.Err == nil {
		return e.Log
	}
	return e.Log + ": " + e.Err.Error()
}

func (e *proxyError) Unwrap() error { return e.Err }

// errUpstreamTimeout answers a request whose route's timeout passed before
// the upstream's response headers arrived.
var errUpstreamTimeout = &proxyError{Status: http.StatusGatewayTimeout,
	Detail: "The upstream did not answer in time.", Log: "upstream request failed", Err: errors.New("gateway: upstream timeout")}

// errClientGone marks a request whose client went away before it was
// answered: nobody reads an answer, and 499 (nginx's convention) only
// shows in metrics and logs.
var errClientGone = &proxyError{Status: statusClientClosed, Log: "client went away"}

// upstreamFailed returns the error a failed round trip is answered with:
// 504 for a timeout, 502 otherwise.
func upstreamFailed(err error) *proxyError {
	if isTimeout(err) {
		return &proxyError{Status: http.StatusGatewayTimeout, Detail: errUpstreamTimeout.Detail, Log: errUpstreamTimeout.Log, Err: err}
	}
	return &proxyError{Status: http.StatusBadGateway, Detail: "The upstream could not be reached.", Log: "upstream request failed", Err: err}
}

// proxyConfig is what a proxy route needs from the configuration.
type proxyConfig struct {
	route        string
	target       *url.URL
	stripPrefix  int
	preserveHost bool
	timeout      time.Duration
	// ip resolves the client address for X-Real-IP and tells whether the
	// peer is a trusted proxy; nil trusts no proxy.
	ip *httplimit.IPResolver
	// pool is the route's targets in the core (core.Upstream.Pool); nil
	// forwards to target alone (tests).
	pool *core.Pool
	// tlsConfig is an https upstream's upstream_tls (nil: the default
	// verification), which tlsKey names among the pools; tlsErr, when not
	// nil, is why it could not be loaded: every request fails with it.
	tlsConfig *tls.Config
	tlsKey    string
	tlsErr    error
}

// proxyHandler forwards requests to one route's upstream over a pool of
// keep-alive connections (upstreams). It is safe for concurrent use.
type proxyHandler struct {
	c proxyConfig
	// targets are the route's upstream targets, by core.Target index
	// (one for an `upstream:` route).
	targets []target
	metrics *metrics.Metrics
	log     *slog.Logger
	// table names a request's client for the targets' latency signals.
	table *core.Table
	// panics records a panic in the goroutines a request starts and in
	// the streaming of its answer.
	panics *core.Panics
}

// target is one upstream target of a route with its connection pool.
type target struct {
	url    *url.URL
	client *fasthttp.HostClient
	tls    bool
	addr   string // host:port, for Upgrade's own connection
	// core is the core's view of the target (its balancing, health and
	// latency signal); nil in tests that build a proxyHandler bare.
	core *core.Target
}

// newProxyHandler builds the reverse proxy of one route on the gateway's
// upstream connection pools: one target, c.target, or each of c.pool's.
func newProxyHandler(c proxyConfig, ups *upstreams, m *metrics.Metrics, log *slog.Logger) *proxyHandler {
	h := &proxyHandler{c: c, metrics: m, log: log}
	add := func(u *url.URL, ct *core.Target) {
		tg := target{url: u, tls: u.Scheme == "https", addr: hostPort(u), core: ct}
		tg.client = ups.client(tg.addr, tg.tls, c.tlsConfig, c.tlsKey)
		h.targets = append(h.targets, tg)
	}
	if c.pool == nil {
		add(c.target, nil)
		return h
	}
	for _, ct := range c.pool.Targets() {
		add(ct.URL, ct)
	}
	return h
}

// pick returns the target a request tries after those tried (bit i for
// target i), nil when every target was tried.
func (h *proxyHandler) pick(r *core.Request, tried uint64) *target {
	if h.c.pool == nil {
		if tried != 0 {
			return nil
		}
		return &h.targets[0]
	}
	t := h.c.pool.Pick(r, tried)
	if t == nil {
		return nil
	}
	return &h.targets[t.Index()]
}

// latency returns tg's latency signal, nil when nothing reads it.
func (tg *target) latency() *core.LatencySignal {
	if tg.core == nil {
		return nil
	}
	return tg.core.Latency
}

// acquire and release count a request on tg in the core's view.
func (tg *target) acquire() {
	if tg.core != nil {
		tg.core.Acquire()
	}
}

func (tg *target) release(o core.TargetOutcome) {
	if tg.core != nil {
		tg.core.Release(o)
	}
}

// hostPort returns u's host with the scheme's default port when it has none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return net.JoinHostPort(u.Hostname(), "443")
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// hopHeaders are the hop-by-hop headers (core.HopHeaders).
var hopHeaders = core.HopHeaders

// hopConnection is the index of Connection in hopHeaders.
var hopConnection = slices.Index(hopHeaders, "Connection")

// replacedHeaders are the request headers outbound drops: the hop-by-hop
// ones, and the client address headers it sets itself (X-Forwarded-For
// gets the client's values back with the peer appended; Forwarded is
// kept only from a trusted proxy).
var replacedHeaders = append(append([]string(nil), hopHeaders...), "X-Forwarded-For", "X-Real-Ip", "Forwarded")

// Indexes into replacedHeaders of the headers outbound also reads.
var (
	replacedConnection = slices.Index(replacedHeaders, "Connection")
	replacedXFF        = slices.Index(replacedHeaders, "X-Forwarded-For")
	replacedForwarded  = slices.Index(replacedHeaders, "Forwarded")
)

// The canonical names of the request headers outbound sets, for
// SetCanonical (no normalising per request; TestReplacedHeaderIndexes).
var (
	keyConnection      = []byte("Connection")
	keyUpgrade         = []byte("Upgrade")
	keyXForwardedFor   = []byte("X-Forwarded-For")
	keyXForwardedHost  = []byte("X-Forwarded-Host")
	keyXForwardedProto = []byte("X-Forwarded-Proto")
	keyXRealIP         = []byte("X-Real-Ip")
)

// presentIn returns a bit set of the names that the header keys hold (bit i
// for names[i]), compared case-insensitively: one pass over the headers
// instead of a Peek, which normalises and scans, per name.
func presentIn(keys iter.Seq2[[]byte, []byte], names []string) uint32 {
	var present uint32
	for k := range keys {
		for i, name := range names {
			if len(k) == len(name) && strings.EqualFold(string(k), name) {
				present |= 1 << i
				break
			}
		}
	}
	return present
}

// connectionListed appends the header names that the Connection header
// values list to dst (core.ConnectionListed).
func connectionListed(dst []string, values [][]byte) []string {
	return core.ConnectionListed(dst, values)
}

// outbound rewrites oh, which holds the client's request headers (the
// client's request itself, or a copy), into the headers sent upstream for r:
// the hop-by-hop ones dropped, the X-Forwarded-* and client address headers
// of docs/semantics.md §4.4, the upstream's Host (or the client's under
// preserve_host) and the path joined to the upstream's base path.
func (h *proxyHandler) outbound(ctx *fasthttp.RequestCtx, x *exchange, oh *fasthttp.RequestHeader, upgrade string, tg *target) {
	r := &x.Req
	// Most requests carry none of the headers replaced or dropped below:
	// one pass finds those present, and only they are read and deleted
	// (each Peek and Del normalises its name and scans every header).
	// Everything kept of them is read before any is deleted.
	present := presentIn(oh.All(), replacedHeaders)
	// The client's X-Forwarded-For gets the peer appended (even when
	// Connection named it); its X-Forwarded-Host and -Proto are replaced.
	xff := x.buf[:0]
	if present&(1<<replacedXFF) != 0 {
		for i, v := range oh.PeekAll("X-Forwarded-For") {
			if i > 0 {
				xff = append(xff, ", "...)
			}
			xff = append(xff, v...)
		}
	}
	xff = r.AppendForwardedFor(xff)
	// Forwarded is kept only from a trusted proxy (even when Connection
	// named it), after the headers sluice sets.
	var forwarded [][]byte
	if present&(1<<replacedForwarded) != 0 && h.c.ip.PeerTrusted(r) {
		for _, v := range oh.PeekAll("Forwarded") {
			forwarded = append(forwarded, bytes.Clone(v))
		}
	}
	if present&(1<<replacedConnection) != 0 {
		var listed [8]string
		for _, name := range connectionListed(listed[:0], oh.PeekAll("Connection")) {
			oh.Del(name)
		}
	}
	for i, name := range replacedHeaders {
		if present&(1<<i) != 0 {
			oh.Del(name)
		}
	}
	oh.ResetConnectionClose()
	if upgrade != "" {
		oh.SetCanonical(keyConnection, []byte("Upgrade"))
		oh.SetCanonical(keyUpgrade, []byte(upgrade))
	}
	if len(xff) > 0 {
		oh.SetCanonical(keyXForwardedFor, xff)
	}
	x.buf = xff
	oh.SetCanonical(keyXForwardedHost, []byte(r.Host()))
	if r.Secure() {
		oh.SetCanonical(keyXForwardedProto, []byte("https"))
	} else {
		oh.SetCanonical(keyXForwardedProto, []byte("http"))
	}
	if a, ok := h.c.ip.ClientIP(r); ok {
		x.buf = a.AppendTo(x.buf[:0])
		oh.SetCanonical(keyXRealIP, x.buf)
	}
	for _, v := range forwarded {
		oh.AddBytesV("Forwarded", v)
	}
	if s := r.Span(); s.On() {
		injectTrace(oh, s)
	}
	h.aim(oh, x, tg)
}

// aim points the request headers oh at tg: its Host (or the client's under
// preserve_host) and the request-target joined to its base path.
func (h *proxyHandler) aim(oh *fasthttp.RequestHeader, x *exchange, tg *target) {
	r := &x.Req
	up := core.Upstream{Target: tg.url, PreserveHost: h.c.preserveHost}
	oh.Set("Host", up.Host(r))
	x.buf = h.appendRequestURI(x.buf[:0], r, tg.url)
	oh.SetRequestURIBytes(x.buf)
}

// appendRequestURI appends the target sent upstream to u for r to dst
// (core.Upstream.AppendRequestURI).
func (h *proxyHandler) appendRequestURI(dst []byte, r *core.Request, u *url.URL) []byte {
	up := core.Upstream{Target: u, StripPrefix: h.c.stripPrefix}
	return up.AppendRequestURI(dst, r)
}

// serve forwards r and writes the upstream's answer, streaming its body,
// or the problem answer of a failure. A request body that cannot be read
// is answered 400, and one still arriving when the route's timeout passes
// 408 (bodyReader). It returns the status of a request whose client went
// away (499), else 0.
func (h *proxyHandler) serve(ctx *fasthttp.RequestCtx, x *exchange, res *httplimit.Result) {
	if h.c.tlsErr != nil {
		h.fail(ctx, x, res, upstreamFailed(h.c.tlsErr))
		return
	}
	if up := upgradeOf(&ctx.Request.Header); up != "" {
		h.serveUpgrade(ctx, x, res, up)
		return
	}
	// The client's request is rewritten in place and sent upstream, and
	// the upstream's response read into the client's: nothing is copied.
	// (The engine keeps the client's Connection: close from before the
	// handler; TestConnectionFate.)
	oh := &ctx.Request.Header
	tg := h.pick(&x.Req, 0)
	h.outbound(ctx, x, oh, "", tg)
	var body *bodyReader
	cl := oh.ContentLength()
	if cl != 0 && ctx.Request.IsBodyStream() {
		body = newBodyReader(ctx.RequestBodyStream(), ctx, cl)
		defer body.release()
	}
	// A request that reached no byte of a target (its connection refused,
	// say) is tried on another, at most retries times: only a GET, HEAD
	// or OPTIONS without a body. It was decided once, and keeps its
	// leases throughout.
	retries := 0
	if h.c.pool != nil && body == nil && idempotent(oh) {
		retries = h.c.pool.Retries()
	}
	var tried uint64
	for attempt := 0; ; attempt++ {
		var client uint64
		lat := tg.latency()
		if lat != nil {
			client = h.table.ClientOf(&x.Req)
		}
		tg.acquire()
		ub, reached, err := h.roundTrip(tg, oh, &ctx.Response, body, cl, client, lat)
		if err != nil {
			outcome := core.TargetFailed
			if !reached {
				outcome = core.TargetConnFailed
			}
			tg.release(outcome)
			if !reached && attempt < retries {
				tried |= 1 << tg.core.Index()
				if next := h.pick(&x.Req, tried); next != nil {
					tg = next
					h.aim(oh, x, tg)
					continue
				}
			}
			h.fail(ctx, x, res, err)
			return
		}
		outcome := core.TargetOK
		if ctx.Response.StatusCode() >= 500 {
			outcome = core.TargetFailed
		}
		if ub != nil {
			ub.lease = x.takeLease() // released when the streamed body ends
			ub.panics = h.panics
			ub.target, ub.outcome = tg, outcome // released when the body ends
		} else {
			tg.release(outcome)
		}
		h.answer(ctx, ub, res)
		return
	}
}

// idempotent reports whether a request may be tried on another target:
// GET, HEAD and OPTIONS.
func idempotent(oh *fasthttp.RequestHeader) bool {
	return oh.IsGet() || oh.IsHead() || oh.IsOptions()
}

// roundTrip sends the request headers oh, with body (nil: none) of length
// size (-1: chunked), and reads the response into resp within the route's
// timeout (see readResponse), recording sluice_upstream_duration_seconds
// and, for load shedding, the upstream's latency for client (core.LatencySignal:
// from the request's last byte written to the answer's first byte read, or
// to the timeout that came first). A streamed response body then streams
// without that bound (upstreamBody). The request headers are sent before
// the body, so the upstream sees the request while the body is still
// arriving.
func (h *proxyHandler) roundTrip(tg *target, oh *fasthttp.RequestHeader, resp *fasthttp.Response, body *bodyReader, size int, client uint64, latency *core.LatencySignal) (ub *upstreamBody, reached bool, err error) {
	start := time.Now()
	wait := time.Duration(-1) // the upstream's latency; -1: not measured
	var waitp *time.Duration
	if latency != nil {
		waitp = &wait
	}
	defer func() {
		h.metrics.UpstreamDuration(h.c.route, time.Since(start))
		if wait >= 0 {
			latency.Observe(client, wait)
		}
	}()
	var deadline time.Time
	if h.c.timeout > 0 {
		deadline = start.Add(h.c.timeout)
		if body != nil {
			// The upstream connection's deadline cannot end a write that
			// waits on the client's body: the timer ends the read on the
			// client's connection (bodyReader.endRead), so a client that
			// stops sending cannot hold the request and an upstream
			// connection.
			t := time.AfterFunc(h.c.timeout, func() { h.panics.Guard(metrics.DoorGateway, body.endRead) })
			defer t.Stop()
		}
	}
	ub, reached, err = h.exchange(tg.client, oh, resp, body, size, start, deadline, waitp, false)
	if err != nil && !reached && !dialFailed(err) && body == nil && idempotent(oh) {
		// A pooled connection the upstream had closed before the request
		// reached it (upconn.Reached): a GET, HEAD or OPTIONS once more, on
		// a pooled connection found open, or a new one; then, when that
		// one too was closed under it (the upstream is closing its
		// connections), on a new connection, which an upstream that is
		// gone refuses (and the pool tries another target). A request any
		// byte of which reached the upstream is never sent again.
		wait = -1
		ub, reached, err = h.exchange(tg.client, oh, resp, nil, 0, start, deadline, waitp, true)
		if err != nil && !reached && !dialFailed(err) {
			tg.client.CloseIdleConnections()
			wait = -1
			ub, reached, err = h.exchange(tg.client, oh, resp, nil, 0, start, deadline, waitp, true)
		}
	}
	if err == nil {
		return ub, true, nil
	}
	if body != nil {
		// The client's fault (or its leaving) is what the upstream request
		// failed of, whatever error the connection reports.
		if berr := body.failure(); berr != nil {
			return nil, true, berr
		}
	}
	return nil, reached, upstreamFailed(err)
}

// idleCheck is how long a pooled connection lies idle before it is
// looked at (upconn.Conn.PeerClosed) ahead of every request: an upstream
// closes a connection it keeps alive after an idle timeout of its own.
const idleCheck = 100 * time.Millisecond

// dialFailed reports whether err is a connection to the upstream that
// could not be made.
func dialFailed(err error) bool {
	var de *dialError
	return errors.As(err, &de)
}

// dialError is a connection to the upstream that could not be made.
type dialError struct{ err error }

func (e *dialError) Error() string { return e.err.Error() }
func (e *dialError) Unwrap() error { return e.err }

// exchange is one attempt of roundTrip on a connection of the upstream's
// pool. It returns the response body to stream, nil when there is none. On
// failure resp holds nothing of the upstream's. When latency is not nil,
// it sets *latency to the time from the request's last byte written to the
// response's first byte read, or to the deadline passing before it.
//
// reached is false when no byte of the request reached the upstream
// (upconn.Reached): no connection could be had (a dialError), or the one
// taken was closed before the request arrived.
//
// A pooled connection the upstream has closed is skipped (closed, and
// another taken) before the request is written when it was found so: a
// connection idle for longer than idleCheck is looked at (PeerClosed)
// before any request, and every one before a request with a body (which
// cannot be sent again: its body is a stream), or any other than a GET,
// HEAD or OPTIONS, or when again is true (the request is sent again after
// its pooled connection turned out closed). After four such connections
// in a row again closes every idle connection of the pool, so that the
// request goes on a new connection. now is the attempt's start.
func (h *proxyHandler) exchange(hc *fasthttp.HostClient, oh *fasthttp.RequestHeader, resp *fasthttp.Response, body *bodyReader, size int, now time.Time, deadline time.Time, latency *time.Duration, again bool) (ub *upstreamBody, reached bool, err error) {
	var wait time.Duration
	if !deadline.IsZero() {
		wait = time.Until(deadline)
	}
	cc, err := hc.AcquireConn(wait, false)
	if err != nil {
		return nil, false, &dialError{err}
	}
	// A pooled connection keeps the deadline of its last request until it
	// gets this one's (none: zero). peerClosed reads only within the
	// deadline.
	check := body != nil || again || !idempotent(oh)
	nowNano := now.UnixNano()
	var uc *upconn.Conn
	for tries := 0; ; tries++ {
		if err := cc.Conn().SetDeadline(deadline); err != nil {
			hc.CloseConn(cc)
			return nil, false, err
		}
		uc = upconn.Of(cc.Conn())
		if uc == nil || tries >= 4 || !(check || uc.Idle(nowNano) > idleCheck) || !uc.PeerClosed() {
			break
		}
		hc.CloseConn(cc)
		if again && tries == 3 {
			hc.CloseIdleConnections()
		}
		if cc, err = hc.AcquireConn(wait, false); err != nil {
			return nil, false, &dialError{err}
		}
	}
	conn := cc.Conn()
	if tc, ok := conn.(*tls.Conn); ok {
		// The handshake (done once per connection; after it, Handshake
		// returns at once) is no byte of the request.
		if err := tc.Handshake(); err != nil {
			hc.CloseConn(cc)
			return nil, false, err
		}
	}
	var mark upconn.Mark
	if uc != nil {
		mark = uc.Mark()
	}
	// sent reports whether the request reached the upstream, before its
	// connection is closed (closing a TLS connection writes to it):
	// without an upconn.Conn, true.
	sent := func() bool { return uc == nil || uc.Reached(mark) }
	bw := hc.AcquireWriter(conn)
	var src io.Reader
	if body != nil {
		src = body
	}
	err = writeRequest(bw, oh, src, size)
	hc.ReleaseWriter(bw)
	if err != nil {
		reached = sent()
		hc.CloseConn(cc)
		return nil, reached, err
	}
	var written time.Time
	if latency != nil {
		written = time.Now()
	}
	br := hc.AcquireReader(conn)
	var streamed *fasthttp.Response
	if latency != nil {
		// The upstream's latency ends with its first byte, not its headers.
		_, err = br.Peek(1)
		if err == nil || isTimeout(err) {
			*latency = time.Since(written)
		}
	}
	if err == nil {
		streamed, err = readResponse(br, resp, oh.IsHead())
	}
	if err == nil && streamed != nil {
		// The body streams without the route's timeout.
		if err = conn.SetDeadline(time.Time{}); err != nil {
			streamed.CloseBodyStream() //nolint:errcheck // the connection is closed below
			fasthttp.ReleaseResponse(streamed)
		}
	}
	if err != nil {
		clearResponse(resp)
		hc.ReleaseReader(br)
		reached = sent()
		hc.CloseConn(cc)
		return nil, reached, err
	}
	if uc != nil {
		uc.Use(nowNano)
	}
	if streamed != nil {
		return &upstreamBody{r: streamed.BodyStream(), resp: streamed, release: func(reuse bool) {
			hc.ReleaseReader(br)
			if reuse {
				hc.ReleaseConn(cc)
			} else {
				hc.CloseConn(cc)
			}
		}}, true, nil
	}
	hc.ReleaseReader(br)
	if resp.ConnectionClose() {
		hc.CloseConn(cc)
	} else {
		hc.ReleaseConn(cc)
	}
	return nil, true, nil
}

// maxInterimResponses bounds the 1xx responses read before the final one.
const maxInterimResponses = 100

// readResponse reads the upstream's response headers from br into resp,
// past any interim (1xx) responses but 101. A body of known length that br
// already holds whole is read into resp, with no further read on the
// connection. Any other body is left to stream: readResponse then returns
// a response of its own, holding a copy of resp's headers and the body
// stream (BodyStream), for the caller to release.
func readResponse(br *bufio.Reader, resp *fasthttp.Response, head bool) (streamed *fasthttp.Response, err error) {
	resp.ResetBody()
	resp.SkipBody = head
	for n := 0; ; n++ {
		if err := resp.Header.Read(br); err != nil {
			return nil, err
		}
		if s := resp.StatusCode(); s < 100 || s > 199 || s == http.StatusSwitchingProtocols {
			break
		}
		if n >= maxInterimResponses {
			return nil, errors.New("gateway: too many interim responses from the upstream")
		}
	}
	if s := resp.StatusCode(); head || (s >= 100 && s < 200) || s == http.StatusNoContent || s == http.StatusNotModified {
		return nil, nil // no body
	}
	if cl := resp.Header.ContentLength(); cl >= 0 && br.Buffered() >= cl {
		return nil, resp.ReadBody(br, 0)
	}
	// The client's response cannot hold the upstream's stream: setting its
	// own body stream would close this one.
	streamed = fasthttp.AcquireResponse()
	resp.Header.CopyTo(&streamed.Header)
	streamed.StreamBody = true
	if err := streamed.ReadBody(br, 0); err != nil {
		fasthttp.ReleaseResponse(streamed)
		return nil, err
	}
	return streamed, nil
}

// clearResponse drops what a failed exchange read into the client's
// response w, so that the failure's answer starts clean. The public server
// sends no default Content-Type (its NoDefaultContentType), which a header
// reset would turn back on.
func clearResponse(w *fasthttp.Response) {
	w.ResetBody()
	w.Header.Reset()
	w.Header.SetNoDefaultContentType(true)
}

// writeRequest writes the request headers oh and flushes them, then the
// body: size bytes, or chunked (size -1), each chunk flushed as it is read.
func writeRequest(bw *bufio.Writer, oh *fasthttp.RequestHeader, body io.Reader, size int) error {
	if body == nil {
		if err := oh.Write(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	oh.SetContentLength(size)
	if err := oh.Write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	if size >= 0 {
		n, err := io.CopyBuffer(bw, io.LimitReader(body, int64(size)), *buf)
		if err == nil && n < int64(size) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
		return bw.Flush()
	}
	for {
		n, err := body.Read(*buf)
		if n > 0 {
			bw.WriteString(strconv.FormatInt(int64(n), 16))
			bw.WriteString("\r\n")
			bw.Write((*buf)[:n])
			bw.WriteString("\r\n")
			if ferr := bw.Flush(); ferr != nil {
				return ferr
			}
		}
		if err == io.EOF {
			bw.WriteString("0\r\n\r\n")
			return bw.Flush()
		}
		if err != nil {
			return err
		}
	}
}

// copyBuffers are the buffers request bodies are copied through.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// fail answers a failed round trip: the problem of its *proxyError, with
// the rate-limit headers of the decision that admitted the request (res,
// nil for none: it counted), logged at warn for a 5xx and at debug
// otherwise (any client can cause those as often as it likes). A client
// that went away gets nothing: 499 is only recorded.
func (h *proxyHandler) fail(ctx *fasthttp.RequestCtx, x *exchange, res *httplimit.Result, err error) {
	pe, ok := errors.AsType[*proxyError](err)
	if !ok {
		pe = upstreamFailed(err)
	}
	if pe.Status == statusClientClosed {
		x.Req.SetStatus(statusClientClosed)
		ctx.SetConnectionClose()
		return
	}
	level := slog.LevelDebug
	if pe.Status >= 500 {
		level = slog.LevelWarn
	}
	h.log.Log(ctx, level, pe.Log, "route", h.c.route, "status", pe.Status, "error", pe.Err)
	setRateLimitHeaders(&ctx.Response, res)
	writeProblem(ctx, pe.Status, pe.Detail)
}

// answer completes the upstream's response, read into the client's, for
// the client: the hop-by-hop headers dropped, the rate-limit headers set,
// and a streamed body (ub, nil for none) sent as it arrives (a body
// without a length chunked, each chunk flushed as it comes).
func (h *proxyHandler) answer(ctx *fasthttp.RequestCtx, ub *upstreamBody, res *httplimit.Result) {
	w := &ctx.Response
	if !w.Header.IsHTTP11() {
		asHTTP11(&w.Header)
	}
	dropResponseHops(&w.Header)
	setRateLimitHeaders(w, res)
	if ub == nil {
		return
	}
	size := ub.resp.Header.ContentLength()
	if size < 0 {
		if !ctx.Request.Header.IsHTTP11() {
			answerHTTP10(ctx, ub)
			return
		}
		size = -1
		// A body of unknown length may be an event stream: the client gets
		// the headers at once, not with the first chunk.
		w.ImmediateHeaderFlush = true
	}
	w.SetBodyStream(ub, size)
}

// dropResponseHops deletes from h, an upstream's response headers, the
// hop-by-hop ones and those its Connection header names, and clears the
// upstream's Connection: close, which is not the client's connection's.
func dropResponseHops(h *fasthttp.ResponseHeader) {
	present := presentIn(h.All(), hopHeaders)
	if present&(1<<hopConnection) != 0 {
		var listed [8]string
		for _, name := range connectionListed(listed[:0], h.PeekAll("Connection")) {
			h.Del(name)
		}
	}
	for i, name := range hopHeaders {
		if present&(1<<i) != 0 {
			h.Del(name)
		}
	}
	h.ResetConnectionClose()
}

// answerHTTP10 streams a body of unknown length to an HTTP/1.0 client,
// which cannot read chunked coding: the connection is taken from the engine,
// and the body goes as it comes, ended by closing the connection.
func answerHTTP10(ctx *fasthttp.RequestCtx, ub *upstreamBody) {
	w := &ctx.Response
	head := fmt.Appendf(nil, "HTTP/1.0 %d %s\r\n", w.StatusCode(), http.StatusText(w.StatusCode()))
	for k, v := range w.Header.All() {
		if bytes.EqualFold(k, []byte("Content-Length")) || bytes.EqualFold(k, []byte("Transfer-Encoding")) || bytes.EqualFold(k, []byte("Connection")) {
			continue
		}
		head = append(append(append(append(head, k...), ": "...), v...), "\r\n"...)
	}
	head = append(head, "Connection: close\r\n\r\n"...)
	ctx.HijackSetNoResponse(true)
	ctx.Hijack(func(c net.Conn) {
		defer ub.Close()
		ub.panics.Guard(metrics.DoorGateway, func() {
			if _, err := c.Write(head); err != nil {
				return
			}
			io.Copy(c, ub) //nolint:errcheck // the client may be gone; the connection closes either way
		})
	})
}

// asHTTP11 makes h, the response headers of an upstream that answered in
// another HTTP/1.x version (HTTP/1.0), those of an HTTP/1.1 answer: a proxy
// answers in its own version (RFC 9110 §6.2), and the client's connection
// keeps the fate the client asked for, not the upstream's.
func asHTTP11(h *fasthttp.ResponseHeader) {
	var up fasthttp.ResponseHeader
	h.CopyTo(&up)
	h.Reset()
	h.SetNoDefaultContentType(true)
	h.SetStatusCode(up.StatusCode())
	h.SetStatusMessage(up.StatusMessage())
	h.SetContentLength(up.ContentLength())
	for k, v := range up.All() {
		h.AddBytesKV(k, v)
	}
	if up.ConnectionClose() {
		h.SetConnectionClose() // the upstream's, cleared with the hop-by-hop headers
	}
}

// upstreamBody is the upstream's response body as the client's response
// streams it. Closing it releases the response and returns the upstream
// connection to its pool when the body was read to its end, or closes it.
type upstreamBody struct {
	r       io.Reader
	resp    *fasthttp.Response
	release func(reuse bool)
	eof     bool
	once    sync.Once
	lease   core.Held    // the request's leases, released on Close
	panics  *core.Panics // records a panic while the body streams
	// target, when not nil, is the upstream target the body comes from,
	// released with outcome on Close.
	target  *target
	outcome core.TargetOutcome
}

// errPanicked ends a streamed answer whose reading panicked: the engine
// closes the client's connection.
var errPanicked = errors.New("gateway: panic while streaming the answer")

// Read reads the upstream's body for the engine, past the handler: a panic
// is recovered and recorded here (the engine would swallow it) and ends
// the answer with errPanicked.
func (b *upstreamBody) Read(p []byte) (n int, err error) {
	defer func() {
		if v := recover(); v != nil {
			b.panics.Record(metrics.DoorGateway, v)
			n, err = 0, errPanicked
		}
	}()
	if panichook.Hook != nil {
		panichook.Hook("body", &b.resp.Header)
	}
	n, err = b.r.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// Close ends the body.
func (b *upstreamBody) Close() error {
	b.once.Do(func() {
		reuse := b.eof && !b.resp.ConnectionClose()
		b.resp.CloseBodyStream() //nolint:errcheck // the connection is closed when not reused
		b.release(reuse)
		fasthttp.ReleaseResponse(b.resp)
		b.lease.Release()
		if b.target != nil {
			b.target.release(b.outcome)
		}
	})
	return nil
}

// setRateLimitHeaders sets the headers of a limits decision on w.
func setRateLimitHeaders(w *fasthttp.Response, res *httplimit.Result) {
	if res == nil {
		return
	}
	if res.HasRateLimitHeaders() {
		for i, name := range rateLimitHeaderKeys {
			w.Header.SetCanonical(name, res.RateLimitHeader(i))
		}
	}
	setSCGHeaders(w, res)
}

// rateLimitHeaderKeys are httplimit.RateLimitHeaderNames as bytes. The names
// are canonical already, so they are set without fasthttp normalising them
// on every response.
var rateLimitHeaderKeys = canonicalKeys(httplimit.RateLimitHeaderNames[:])

// canonicalKeys returns names as byte slices, for ResponseHeader.SetCanonical.
func canonicalKeys(names []string) [][]byte {
	keys := make([][]byte, len(names))
	for i, n := range names {
		keys[i] = []byte(n)
	}
	return keys
}

// injectTrace replaces the client's trace headers on the request sent
// upstream with the span's, so the upstream's spans are its children.
func injectTrace(oh *fasthttp.RequestHeader, s *tracing.Span) {
	oh.Del("Traceparent")
	oh.Del("Tracestate")
	s.Inject(func(name, value string) { oh.Set(name, value) })
}
