package gateway

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/metrics"
)

// exchange is one request's working memory on the public listener, pooled.
type exchange struct {
	req      publicRequest
	res      httplimit.Result
	segments []string // the path's segments, for matching
	// fwd is the original request a forward_auth route reads, and
	// fwdSegments its path's segments.
	fwd         forwardedRequest
	fwdSegments []string
}

var exchanges = sync.Pool{New: func() any { return new(exchange) }}

// answered returns the status recorded for r's answer: 499 when the client
// went away, else the response's.
func (r *publicRequest) answered() int {
	if r.status != 0 {
		return r.status
	}
	return r.ctx.Response.StatusCode()
}

// servePublic answers one request of the public listener: it is the
// fasthttp engine's handler. Everything the request goes through past the
// view (routes, keys, limits) reads it as an httplimit.Request. A request
// admitted before its 100 Continue (expect) resumes where it was decided.
func (g *Gateway) servePublic(ctx *fasthttp.RequestCtx) {
	if p, _ := ctx.UserValue(pendingKey{}).(*pending); p != nil {
		p.resume(ctx)
		return
	}
	x := g.begin(ctx, ctx.Time())
	g.finish(x, g.serveRecovering(ctx, x))
}

// begin returns the exchange of a request that starts at now.
func (g *Gateway) begin(ctx *fasthttp.RequestCtx, now time.Time) *exchange {
	x := exchanges.Get().(*exchange)
	x.req = publicRequest{ctx: ctx, xff: x.req.xff[:0], buf: x.req.buf[:0]}
	r := &x.req
	if rt := g.cfg.Server.ReadTimeout; rt > 0 {
		r.readDeadline = now.Add(rt)
	}
	if sampled(&g.cfg.Server.AccessLog) {
		r.entry = newAccessEntry()
	}
	if g.tracer != nil {
		g.startSpan(ctx, r, now)
	}
	return x
}

// finish records the answered request x (route: the id of the route that
// matched, or "") and recycles its exchange.
func (g *Gateway) finish(x *exchange, route string) {
	r := &x.req
	status := r.answered()
	g.metrics.Request(route, status)
	if r.span.On() {
		r.span.End(status)
	}
	if r.entry != nil {
		g.logAccess(r.Context(), r.method, r.entry, route, status)
	}
	x.req = publicRequest{xff: x.req.xff[:0], buf: x.req.buf[:0]}
	x.fwd = forwardedRequest{}
	clear(x.segments)
	clear(x.fwdSegments)
	x.res.Body = nil
	exchanges.Put(x)
}

// serveRecovering is serve with a panic recovered: it is recorded (as
// forward_auth's once a forward_auth route has read the request, else as
// the gateway's) and the request answered 500 (answerPanic). The leases the
// request held are released on the way (route.decide), and the answer
// recorded has no route.
func (g *Gateway) serveRecovering(ctx *fasthttp.RequestCtx, x *exchange) (route string) {
	defer func() {
		if v := recover(); v != nil {
			door := metrics.DoorGateway
			if x.fwd.publicRequest != nil {
				door = metrics.DoorForwardAuth
			}
			g.panics.record(door, v)
			x.req.status = 0
			answerPanic(ctx)
		}
	}()
	return g.serve(ctx, x)
}

// serve answers the request and returns the id of the route that matched, or "".
func (g *Gateway) serve(ctx *fasthttp.RequestCtx, x *exchange) string {
	r := &x.req
	h := &ctx.Request.Header
	r.method = methodString(h.Method())
	if !h.IsHTTP11() && !majorOne(h.Protocol()) {
		ctx.SetConnectionClose()
		writeProblem(ctx, http.StatusHTTPVersionNotSupported, "Only HTTP/1.x is served on this listener.")
		return ""
	}
	if n := headerBytes(h); n > g.maxHeaderBytes {
		writeProblem(ctx, http.StatusRequestHeaderFieldsTooLarge, headerTooLarge(g.maxHeaderBytes))
		return ""
	}
	if status, detail := checkFraming(h); status != 0 {
		ctx.SetConnectionClose()
		writeProblem(ctx, status, detail)
		return ""
	}
	if err := r.parseTarget(h.Host(), h.RequestURI(), ctx.RemoteAddr()); err != nil {
		writeProblem(ctx, http.StatusBadRequest, targetDetail(err))
		return ""
	}
	if err := checkQuery(r.query); err != nil {
		writeProblem(ctx, http.StatusBadRequest, "The query string cannot be parsed: "+err.Error()+".")
		return ""
	}
	in := newInbound(r.host, r.escaped, r.path, x.segments[:0])
	x.segments = in.segments
	// forwardOnly: a forward_auth route took the auth request but not the
	// original request it describes. Only forward_auth routes are tried
	// past it, so that an auth request is never proxied or answered as
	// an ordinary one, which the proxy would take for a verdict.
	forwardOnly := false
	for _, rt := range g.routes {
		if forwardOnly && rt.fwd == nil || !rt.match.match(r, &in) {
			continue
		}
		r.span.Route(rt.id, rt.path, r.method)
		if rt.fwd == nil {
			rt.decide(ctx, r, r, &x.res)
			return rt.id
		}
		if rt.serveForward(ctx, x) {
			return rt.id
		}
		forwardOnly = true
	}
	detail := "No route matches this request."
	switch {
	case forwardOnly:
		detail = "No forward_auth route matches the forwarded request."
	case in.refused != "":
		detail = "No route takes a path with " + in.refused + " (see the path rules in docs/operations.md)."
	case in.encodedSlash:
		detail = `No route matches this request: a path with an encoded "/" or "\" matches only routes with allow_encoded_slash (see the path rules in docs/operations.md).`
	}
	writeProblem(ctx, http.StatusNotFound, detail)
	return ""
}

// decide runs the route's limits on view, the request they read (r
// itself, or the original request of a forward_auth route), then answers r
// with the route's final handler (proxy, fixed answer or forward-auth
// verdict) or the refusal.
func (rt *route) decide(ctx *fasthttp.RequestCtx, r *publicRequest, view httplimit.Request, res *httplimit.Result) {
	// The leases end with the response: when decide returns, unless the
	// final handler took them for a body it streams or a connection it
	// hijacks; also on a panic.
	defer func() { r.takeLease().Release() }()
	if rt.shed != nil {
		lease, reason := rt.shed.admit(view.Context(), func() uint64 {
			r.client = rt.clientOf(view)
			return r.client
		})
		if reason != "" {
			rt.shed.shed(ctx, reason)
			return
		}
		r.lease[1] = lease
	}
	if rt.mw == nil {
		rt.admit(ctx, r, nil)
		return
	}
	rt.mw.Decide(view, res)
	if res.Forward {
		r.lease[0] = rt.mw.Hold(res)
		if panicHook != nil {
			panicHook("decide", &ctx.Request.Header)
		}
		rt.admit(ctx, r, res)
		return
	}
	if res.Status == 0 { // the client went away during a shape-mode hold
		r.status = statusClientClosed
		ctx.SetConnectionClose()
		return
	}
	setRateLimitHeaders(&ctx.Response, res)
	if res.RetryAfter > 0 {
		ctx.Response.Header.Set("Retry-After", strconv.FormatInt(res.RetryAfter, 10))
	}
	status := res.Status
	if status == http.StatusTooManyRequests && rt.denyStatus != 0 {
		status = rt.denyStatus
	}
	writeProblemBody(ctx, status, res.Body)
}

// admit hands a request the limits let through to the route's final
// handler; a request deciding before its 100 Continue is kept, with its
// leases, for when its body comes (pending.resume).
func (rt *route) admit(ctx *fasthttp.RequestCtx, r *publicRequest, res *httplimit.Result) {
	if p := r.pending; p != nil {
		p.rt, p.res, p.lease = rt, res, r.takeLease()
		return
	}
	rt.final(ctx, r, res)
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

// methodString returns the request method as a string, without an
// allocation for the common ones.
func methodString(m []byte) string {
	switch string(m) { // no allocation: the compiler compares the bytes
	case "GET":
		return "GET"
	case "POST":
		return "POST"
	case "HEAD":
		return "HEAD"
	case "PUT":
		return "PUT"
	case "DELETE":
		return "DELETE"
	case "PATCH":
		return "PATCH"
	case "OPTIONS":
		return "OPTIONS"
	}
	return string(m)
}
