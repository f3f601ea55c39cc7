package fastengine

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/internal/panichook"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/httplimit"
)

// Handler serves one configuration's public requests on fasthttp: it reads
// each request off the wire into the core's view (core.Request), has the
// core's Table decide it, and carries out the core.Outcome: the proxy of
// the route's upstream, or the answer. It is safe for concurrent use;
// Close closes its upstream connection pools.
type Handler struct {
	table *core.Table
	// proxies are the routes' proxies by route index, nil for a route
	// without an upstream.
	proxies []*proxyHandler
	ups     *upstreams
	metrics *metrics.Metrics
	log     *slog.Logger
	panics  *core.Panics
	// maxHeaderBytes bounds the request line and headers together; larger
	// requests get a JSON 431 (docs/operations.md, "Answers sluice gives itself").
	maxHeaderBytes    int
	readTimeout       time.Duration
	readHeaderTimeout time.Duration
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
	h := &Handler{table: t, ups: newUpstreams(), metrics: o.Metrics, log: o.Log, panics: o.Panics,
		maxHeaderBytes: cfg.Server.MaxHeaderBytes, readTimeout: cfg.Server.ReadTimeout, readHeaderTimeout: cfg.Server.ReadHeaderTimeout}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.maxHeaderBytes <= 0 {
		h.maxHeaderBytes = defaultMaxHeaderBytes
	}
	h.proxies = make([]*proxyHandler, len(t.Routes()))
	for i, rt := range t.Routes() {
		up := rt.Upstream()
		if up == nil {
			continue
		}
		pc := proxyConfig{
			route: rt.ID(), target: up.Target, stripPrefix: up.StripPrefix,
			preserveHost: up.PreserveHost, timeout: up.Timeout, ip: t.IP(), pool: up.Pool,
		}
		if ut := up.TLS; ut != nil && config.SchemeTLS(up.Target.Scheme) {
			pc.tlsKey = ut.Key()
			if pc.tlsConfig, pc.tlsErr = ut.ClientConfig(); pc.tlsErr != nil {
				pc.tlsErr = fmt.Errorf("upstream_tls.%w", pc.tlsErr)
				h.log.Error("upstream TLS configuration not loaded: the route's requests fail with 502", "route", rt.ID(), "error", pc.tlsErr)
			}
		}
		ph := newProxyHandler(pc, h.ups, h.metrics, h.log)
		ph.table, ph.panics = t, h.panics
		h.proxies[i] = ph
	}
	return h
}

// Close closes the idle connections of the upstream pools.
func (h *Handler) Close() { h.ups.close() }

// exchange is one request's working memory on the fasthttp engine, pooled:
// the core's (whose Req is the request's view) and the engine's. It is the
// view's core.Wire.
type exchange struct {
	core.Exchange
	ctx *fasthttp.RequestCtx
	// readDeadline bounds the connection's reads past the request's
	// headers (read_timeout from the request's start), zero for none.
	readDeadline time.Time
	buf          []byte // scratch for the proxy's headers
	// lease holds the request's leases until its response ends; a
	// streamed body or a hijacked connection takes them (takeLease).
	lease core.Held
}

var exchanges = sync.Pool{New: func() any { return new(exchange) }}

var _ core.Wire = (*exchange)(nil)

// Peek returns the first value of a request header.
func (x *exchange) Peek(name string) []byte { return x.ctx.Request.Header.Peek(name) }

// PeekAll returns every value of a request header.
func (x *exchange) PeekAll(name string) [][]byte { return x.ctx.Request.Header.PeekAll(name) }

// RemoteAddr returns the TCP peer as net/http's Request.RemoteAddr gives it.
func (x *exchange) RemoteAddr() string { return string(appendAddr(nil, x.ctx.RemoteAddr())) }

// takeLease hands the request's leases to the caller, who then releases
// them when the response ends: a streamed body or a hijacked connection
// outlives the handler.
func (x *exchange) takeLease() core.Held {
	l := x.lease
	x.lease = core.Held{}
	return l
}

// answered returns the status recorded for x's answer: 499 when the client
// went away, else the response's.
func (x *exchange) answered() int {
	if s := x.Req.Status(); s != 0 {
		return s
	}
	return x.ctx.Response.StatusCode()
}

// Serve answers one request of the public listener: it is the fasthttp
// engine's handler. A request admitted before its 100 Continue (Expect)
// resumes where it was decided.
func (h *Handler) Serve(ctx *fasthttp.RequestCtx) {
	if p, _ := ctx.UserValue(pendingKey{}).(*pending); p != nil {
		p.resume(ctx)
		return
	}
	x := h.begin(ctx, ctx.Time())
	h.finish(x, h.serveRecovering(ctx, x))
}

// begin returns the exchange of a request that starts at now.
func (h *Handler) begin(ctx *fasthttp.RequestCtx, now time.Time) *exchange {
	x := exchanges.Get().(*exchange)
	x.ctx = ctx
	hd := &ctx.Request.Header
	x.Req.Reset(x, core.MethodString(hd.Method()), hd.Host(), hd.RequestURI(), peerOf(ctx.RemoteAddr()))
	if h.readTimeout > 0 {
		x.readDeadline = now.Add(h.readTimeout)
	}
	h.table.Begin(&x.Req)
	if h.table.Tracing() {
		h.table.StartSpan(&x.Req, string(ctx.Path()), now)
	}
	return x
}

// finish records the answered request x (route: the id of the route that
// took it, or "") and recycles its exchange.
func (h *Handler) finish(x *exchange, route string) {
	h.table.Finish(&x.Req, route, x.answered())
	x.Clear()
	x.ctx, x.readDeadline, x.lease = nil, time.Time{}, core.Held{}
	exchanges.Put(x)
}

// serveRecovering is serve with a panic recovered: it is recorded (as
// forward_auth's once a forward_auth route has read the request, else as
// the gateway's) and the request answered 500 (answerPanic). The leases the
// request held are released on the way, and the answer recorded has no
// route.
func (h *Handler) serveRecovering(ctx *fasthttp.RequestCtx, x *exchange) (route string) {
	defer func() {
		if v := recover(); v != nil {
			door := metrics.DoorGateway
			if x.Forwarded() {
				door = metrics.DoorForwardAuth
			}
			h.panics.Record(door, v)
			x.takeLease().Release()
			x.Req.SetStatus(0)
			answerPanic(ctx)
		}
	}()
	return h.serve(ctx, x)
}

// serve answers the request and returns the id of the route that took it,
// or "".
func (h *Handler) serve(ctx *fasthttp.RequestCtx, x *exchange) string {
	out := h.decide(ctx, x)
	route := ""
	if out.Route != nil {
		route = out.Route.ID()
	}
	x.lease = out.Lease
	defer func() { x.takeLease().Release() }()
	h.carryOut(ctx, x, &out)
	return route
}

// decide checks what the engine itself refuses (a version other than
// HTTP/1.x, a header block over its bound, ambiguous framing), then has
// the core decide the request.
func (h *Handler) decide(ctx *fasthttp.RequestCtx, x *exchange) core.Outcome {
	hd := &ctx.Request.Header
	if !hd.IsHTTP11() && !majorOne(hd.Protocol()) {
		out := core.Problem(http.StatusHTTPVersionNotSupported, "Only HTTP/1.x is served on this listener.")
		out.Close = true
		return out
	}
	if n := headerBytes(hd); n > h.maxHeaderBytes {
		return core.Problem(http.StatusRequestHeaderFieldsTooLarge, headerTooLarge(h.maxHeaderBytes))
	}
	if status, detail := checkFraming(hd); status != 0 {
		out := core.Problem(status, detail)
		out.Close = true
		return out
	}
	return h.table.Decide(&x.Exchange)
}

// carryOut carries out the core's Outcome for x: the route's proxy, or the
// answer out describes.
func (h *Handler) carryOut(ctx *fasthttp.RequestCtx, x *exchange, out *core.Outcome) {
	switch {
	case out.Gone:
		ctx.SetConnectionClose()
	case out.Forward:
		if panichook.Hook != nil {
			panichook.Hook("forward", &ctx.Request.Header)
		}
		h.proxies[out.Route.Index()].serve(ctx, x, out.Result)
	default:
		writeOutcome(ctx, out)
	}
}

// writeOutcome writes an answer the core decided: a fixed answer's
// headers or the problem+json ones, the rate-limit headers, Retry-After,
// the status and the body.
func writeOutcome(ctx *fasthttp.RequestCtx, out *core.Outcome) {
	w := &ctx.Response
	if out.Close {
		ctx.SetConnectionClose()
	}
	if out.Location != "" {
		w.Header.Set("Location", out.Location)
	}
	if f := out.Fixed; f != nil {
		for _, kv := range f.Headers {
			w.Header.Add(kv[0], kv[1])
		}
		setRateLimitHeaders(w, out.Result)
		w.SetStatusCode(out.Status)
		w.SetBodyRaw(out.Body) // the engine leaves the body out of an answer to HEAD
		return
	}
	setRateLimitHeaders(w, out.Result)
	if out.RetryAfter > 0 {
		w.Header.Set("Retry-After", strconv.FormatInt(out.RetryAfter, 10))
	}
	if out.Body == nil {
		w.SetStatusCode(out.Status) // forward-auth's 200: no body
		return
	}
	writeProblemBody(ctx, out.Status, out.Body)
}

// writeProblem answers with the problem+json body of docs/semantics.md §5.3.
func writeProblem(ctx *fasthttp.RequestCtx, status int, detail string) {
	writeProblemBody(ctx, status, httplimit.ProblemBody(status, detail))
}

// writeProblemBody answers status with a problem body; headers set before
// (rate-limit headers, Retry-After) stay.
func writeProblemBody(ctx *fasthttp.RequestCtx, status int, body []byte) {
	w := &ctx.Response
	for _, kv := range httplimit.ProblemHeaders {
		w.Header.Set(kv[0], kv[1])
	}
	w.SetStatusCode(status)
	w.SetBody(body)
}

// peerOf returns a TCP peer's address, an IPv4 peer of a dual-stack
// listener as IPv4 (as net.TCPAddr.String writes it), the zero AddrPort
// for another kind of peer.
func peerOf(a net.Addr) netip.AddrPort {
	if t, ok := a.(*net.TCPAddr); ok {
		ap := t.AddrPort()
		return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	}
	return netip.AddrPort{}
}

// appendAddr appends a as net/http's Request.RemoteAddr gives it.
func appendAddr(b []byte, a net.Addr) []byte {
	switch a := a.(type) {
	case nil:
		return b
	case *net.TCPAddr:
		return peerOf(a).AppendTo(b)
	}
	return append(b, a.String()...)
}
