package httpengine

import (
	"crypto/x509"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
)

// defaultMaxHeaderBytes is server.max_header_bytes's default.
const defaultMaxHeaderBytes = 16 << 10

// Handler serves one configuration's public requests on net/http: it
// reads each request into the core's view, has the core's Table decide
// it, and carries out the core.Outcome. It is safe for concurrent use;
// Close closes its upstream connection pools.
type Handler struct {
	table *core.Table
	// proxies are the routes' proxies by route index, nil for a route
	// without an upstream.
	proxies []*proxy
	ups     *transports
	metrics *metrics.Metrics
	log     *slog.Logger
	panics  *core.Panics
	// maxHeaderBytes bounds the request line (or pseudo-header fields) and
	// headers together; larger requests get a problem+json 431.
	maxHeaderBytes int
}

// HandlerOptions are what a Handler takes besides its table and
// configuration. Metrics is required.
type HandlerOptions struct {
	Metrics *metrics.Metrics
	// Log receives upstream failures; nil discards them.
	Log *slog.Logger
	// Panics records the panics recovered while serving; nil records none.
	Panics *core.Panics
}

// NewHandler returns the handler of t, the routes of cfg, with one proxy
// per upstream route on keep-alive connection pools it owns.
func NewHandler(t *core.Table, cfg *config.Config, o HandlerOptions) *Handler {
	h := &Handler{table: t, ups: newTransports(), metrics: o.Metrics, log: o.Log, panics: o.Panics,
		maxHeaderBytes: cfg.Server.MaxHeaderBytes}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxHeaderBytes <= 0 {
		h.maxHeaderBytes = defaultMaxHeaderBytes
	}
	h.proxies = make([]*proxy, len(t.Routes()))
	for i, rt := range t.Routes() {
		if up := rt.Upstream(); up != nil {
			h.proxies[i] = newProxy(rt.ID(), up, t, h)
		}
	}
	return h
}

// Close closes the idle connections of the upstream pools.
func (h *Handler) Close() { h.ups.close() }

// exchange is one request's working memory on the net/http engine,
// pooled: the core's (whose Req is the request's view) and the engine's.
// It is the view's core.Wire.
type exchange struct {
	core.Exchange
	r   *http.Request
	buf []byte // scratch for the proxy's headers
	// lease holds the request's leases until its response ends.
	lease core.Held
	// res is the decision's result, whose headers go on the answer.
	res *httplimit.Result
	// bodyErr is the error reading the client's body ended with, the
	// cause of a failed round trip.
	bodyErr error
	// timedOut: the route's timeout passed before the upstream answered.
	timedOut bool
	// grpc: the request is a gRPC call (core.IsGRPC), whose answers the
	// gateway makes are gRPC ones; not for a forward_auth route's.
	grpc bool
	// deadline is a gRPC call's deadline (the shorter of its grpc-timeout
	// and the route's timeout), zero for none.
	deadline time.Time
	// grpcEnd, when not 0, is the status a gRPC call whose answer had begun
	// ended with (504: its deadline passed; 502: the upstream failed).
	grpcEnd int
}

var exchanges = sync.Pool{New: func() any { return new(exchange) }}

var (
	_ core.Wire               = (*exchange)(nil)
	_ httplimit.ClientWatcher = (*exchange)(nil)
)

// Peek returns the first value of a request header.
func (x *exchange) Peek(name string) []byte {
	v := x.r.Header.Values(name)
	if len(v) == 0 {
		return nil
	}
	return bytesOf(v[0])
}

// PeekAll returns every value of a request header.
func (x *exchange) PeekAll(name string) [][]byte {
	vs := x.r.Header.Values(name)
	if len(vs) == 0 {
		return nil
	}
	out := make([][]byte, len(vs))
	for i, v := range vs {
		out[i] = bytesOf(v)
	}
	return out
}

// RemoteAddr returns the TCP peer.
func (x *exchange) RemoteAddr() string { return x.r.RemoteAddr }

// WatchClient ends a shape-mode hold when the client leaves: its
// request's context is done then (the connection closed, or an HTTP/2
// stream reset).
func (x *exchange) WatchClient() (<-chan struct{}, func()) {
	return x.r.Context().Done(), func() {}
}

// bytesOf returns s's bytes without a copy, for the core's Wire, which
// reads them during the call and never writes or keeps them.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// ServeHTTP answers one request of the public HTTPS or h2c listener.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	x := exchanges.Get().(*exchange)
	x.r = r
	now := time.Now()
	x.Req.Reset(x, r.Method, bytesOf(r.Host), bytesOf(r.RequestURI), peerOf(r.RemoteAddr))
	x.Req.SetHTTP2Upstreams()
	x.grpc = core.IsGRPC(r.Header.Get("Content-Type"))
	if r.TLS != nil {
		x.Req.SetTLS(clientCert(r))
	}
	h.table.Begin(&x.Req)
	if h.table.Tracing() {
		h.table.StartSpan(&x.Req, r.URL.Path, now)
	}
	sw := &statusWriter{ResponseWriter: w}
	route, gone := h.serveRecovering(sw, x)
	status := sw.status
	if status == 0 {
		status = http.StatusOK
	}
	h.table.Finish(&x.Req, route, status)
	x.Clear()
	*x = exchange{Exchange: x.Exchange, buf: x.buf[:0]}
	exchanges.Put(x)
	if gone {
		// The client went away: no answer, and the connection (HTTP/1.1)
		// or stream (HTTP/2) is ended.
		panic(http.ErrAbortHandler)
	}
}

// clientCert returns the client's verified certificate, nil for none.
func clientCert(r *http.Request) *x509.Certificate {
	if len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		return r.TLS.VerifiedChains[0][0]
	}
	return nil
}

// peerOf returns the TCP peer of a RemoteAddr, IPv4-mapped addresses as
// IPv4, the zero AddrPort when it is not one.
func peerOf(remote string) netip.AddrPort {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// serveRecovering is serve with a panic recovered: it is recorded (as
// forward_auth's once a forward_auth route has read the request, else as
// the gateway's) and the request answered 500 when nothing was sent yet.
// The leases the request held are released on the way. A panic of
// http.ErrAbortHandler (the proxy's, for a client gone or a broken
// stream) passes through.
func (h *Handler) serveRecovering(w *statusWriter, x *exchange) (route string, gone bool) {
	defer func() {
		if v := recover(); v != nil {
			x.lease.Release()
			x.lease = core.Held{}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			door := metrics.DoorGateway
			if x.Forwarded() {
				door = metrics.DoorForwardAuth
			}
			h.panics.Record(door, v)
			x.Req.SetStatus(0)
			route = ""
			switch {
			case w.status == 0 && x.grpc && !x.Forwarded():
				writeGRPC(w, x, http.StatusInternalServerError, "The gateway failed to answer this request.", nil, 0)
			case w.status == 0:
				writeProblem(w, http.StatusInternalServerError, "The gateway failed to answer this request.")
			default:
				w.status = http.StatusInternalServerError
				panic(http.ErrAbortHandler)
			}
		}
	}()
	out := h.decide(x)
	if out.Route != nil {
		route = out.Route.ID()
		x.grpc = x.grpc && !out.Route.ForwardAuth()
	}
	x.lease = out.Lease
	defer func() {
		x.lease.Release()
		x.lease = core.Held{}
	}()
	switch {
	case out.Gone:
		return route, true
	case out.Forward:
		h.proxies[out.Route.Index()].serve(w, x, out.Result)
		if x.Req.Status() == core.StatusClientClosed {
			return route, true
		}
	case x.grpc:
		writeGRPCOutcome(w, x, &out)
	default:
		writeOutcome(w, x.r, &out)
	}
	return route, false
}

// decide checks what the engine itself refuses (a header block over its
// bound, an HTTP/1.1 Connection header that names a framing header, an
// HTTP/2 Host that disagrees with :authority, a gRPC call's malformed
// grpc-timeout), then has the core decide the request.
func (h *Handler) decide(x *exchange) core.Outcome {
	r := x.r
	if n := headerBytes(r); n > h.maxHeaderBytes {
		return core.Problem(http.StatusRequestHeaderFieldsTooLarge, headerTooLarge(h.maxHeaderBytes))
	}
	if r.ProtoMajor == 1 && namesFraming(r.Header["Connection"]) {
		// As on the cleartext listener (docs/operations.md, "Answers
		// sluice gives itself"): 400, and the connection closed.
		out := core.Problem(http.StatusBadRequest, "The Connection header names a framing header (Content-Length or Transfer-Encoding).")
		out.Close = true
		return out
	}
	if r.ProtoMajor == 2 {
		if hosts := r.Header["Host"]; len(hosts) > 0 && (len(hosts) > 1 || hosts[0] != r.Host) {
			return core.Problem(http.StatusBadRequest, "The request's Host header disagrees with its :authority.")
		}
	}
	if x.grpc {
		if v := r.Header.Values("Grpc-Timeout"); len(v) > 1 || len(v) == 1 && !validGRPCTimeout(v[0]) {
			return core.Problem(http.StatusBadRequest, "The call's grpc-timeout is malformed (1 to 8 digits and a unit: H, M, S, m, u or n).")
		}
	}
	return h.table.Decide(&x.Exchange)
}

// namesFraming reports whether a Connection header's values name
// Content-Length or Transfer-Encoding.
func namesFraming(values []string) bool {
	for _, v := range values {
		for tok := range strings.SplitSeq(v, ",") {
			tok = strings.TrimSpace(tok)
			if strings.EqualFold(tok, "Content-Length") || strings.EqualFold(tok, "Transfer-Encoding") {
				return true
			}
		}
	}
	return false
}

// headerTooLarge is the detail of a 431.
func headerTooLarge(bound int) string {
	return fmt.Sprintf("The request line and headers exceed %d bytes.", bound)
}

// headerBytes returns the size of r's request line and header block as
// HTTP/1.1 sends them ("METHOD URI PROTO\r\n", "Name: value\r\n" per field,
// the Host line, the final "\r\n"), the measure fastengine applies, for an
// HTTP/2 request too.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len("HTTP/1.1") + 2
	if r.Host != "" {
		n += len("Host: ") + len(r.Host) + 2
	}
	for name, vs := range r.Header {
		for _, v := range vs {
			n += len(name) + 2 + len(v) + 2
		}
	}
	return n + 2
}

// writeOutcome writes an answer the core decided: a fixed answer's
// headers or the problem+json ones, the rate-limit headers, Location,
// Retry-After, the status and the body.
func writeOutcome(w http.ResponseWriter, r *http.Request, out *core.Outcome) {
	hd := w.Header()
	if out.Close && r.ProtoMajor == 1 {
		hd.Set("Connection", "close")
	}
	if out.Location != "" {
		hd.Set("Location", out.Location)
	}
	if f := out.Fixed; f != nil {
		for _, kv := range f.Headers {
			hd.Add(kv[0], kv[1])
		}
		setRateLimitHeaders(hd, out.Result)
		hd.Set("Content-Length", strconv.Itoa(len(out.Body)))
		w.WriteHeader(out.Status)
		w.Write(out.Body) //nolint:errcheck // the client may be gone; net/http drops a HEAD's body
		return
	}
	setRateLimitHeaders(hd, out.Result)
	if out.RetryAfter > 0 {
		hd.Set("Retry-After", strconv.FormatInt(out.RetryAfter, 10))
	}
	if out.Body == nil {
		hd.Set("Content-Length", "0")
		w.WriteHeader(out.Status) // forward-auth's 200, a redirect: no body
		return
	}
	writeProblemBody(w, out.Status, out.Body)
}

// writeProblem answers with the problem+json body of docs/semantics.md §5.3.
func writeProblem(w http.ResponseWriter, status int, detail string) {
	writeProblemBody(w, status, httplimit.ProblemBody(status, detail))
}

// writeProblemBody answers status with a problem body; headers set before
// (rate-limit headers, Retry-After) stay.
func writeProblemBody(w http.ResponseWriter, status int, body []byte) {
	hd := w.Header()
	for _, kv := range httplimit.ProblemHeaders {
		hd.Set(kv[0], kv[1])
	}
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body) //nolint:errcheck // the client may be gone
}

// setRateLimitHeaders sets the headers of a limits decision on hd.
func setRateLimitHeaders(hd http.Header, res *httplimit.Result) {
	if res == nil {
		return
	}
	if res.HasRateLimitHeaders() {
		for i, name := range httplimit.RateLimitHeaderNames {
			hd[name] = []string{string(res.RateLimitHeader(i))}
		}
	}
	if res.HasSCGHeaders() {
		for i, name := range httplimit.SCGHeaderNames {
			hd[name] = []string{string(res.SCGHeader(i))}
		}
	}
}

// statusWriter records the status of the answer written through it. It
// unwraps to the server's ResponseWriter, so that http.ResponseController
// reaches its Flush and Hijack.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 && status >= 200 || status == http.StatusSwitchingProtocols {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends what is buffered (httputil.ReverseProxy flushes streams).
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
