package gateway

import (
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/httplimit"
)

// A request with Expect: 100-continue is decided once, before the engine
// sends 100 Continue: the engine's ExpectHandler (Server.expectContinue)
// calls expect when the headers are in. A request the gateway answers itself (a refusal,
// a 404, a malformed request) gets that final answer instead of 100
// Continue, as it would without Expect, and its connection is closed (the
// client may already be sending the body). A request the limits admit is
// kept, with its leases, as a pending under the request's user value
// pendingKey; once the engine has sent 100 Continue and set up the body,
// it calls the handler, which resumes it at the route's final handler.

// pendingKey is the user value a pending request is kept under.
type pendingKey struct{}

// pending is a request with Expect: 100-continue that the limits admitted,
// between its decision and its body. The engine closes it when the request
// ends; one never resumed (the client left before its body) is then
// recorded and its leases released. Only the request's connection goroutine
// uses it.
type pending struct {
	g     *Gateway
	x     *exchange
	route string // the id of the route that admitted it
	rt    *route
	res   *httplimit.Result
	lease held
	// counted: the request counts in g.inflight until it ends (Server).
	counted bool
	done    bool
}

// expectContinue is the engine's ExpectHandler for a gateway served alone
// (tests): see expect.
func (g *Gateway) expectContinue(ctx *fasthttp.RequestCtx) int {
	_, p := g.expect(ctx)
	if p == nil {
		return ctx.Response.StatusCode()
	}
	return fasthttp.StatusContinue
}

// expect decides a request that carries Expect: 100-continue. It returns
// 100 and the pending request when the limits admit it, or the status of
// the final answer it wrote into ctx's response and nil.
func (g *Gateway) expect(ctx *fasthttp.RequestCtx) (int, *pending) {
	// The engine sets the request's time after this call: the request
	// starts now.
	now := time.Now()
	x := g.begin(ctx, now)
	if x.req.readDeadline.IsZero() && g.cfg.Server.ReadHeaderTimeout > 0 {
		// Until the body's first byte, the headers' deadline holds (a
		// shape-mode hold's watch restores this one).
		x.req.readDeadline = now.Add(g.cfg.Server.ReadHeaderTimeout)
	}
	p := &pending{g: g, x: x}
	x.req.pending = p
	route := g.serveRecovering(ctx, x)
	x.req.pending = nil
	if p.rt == nil {
		g.finish(x, route)
		return ctx.Response.StatusCode(), nil
	}
	p.route = route
	ctx.SetUserValue(pendingKey{}, p)
	return fasthttp.StatusContinue, p
}

// resume answers the admitted request p with its route's final handler,
// once the engine has sent 100 Continue and the body is there to read.
func (p *pending) resume(ctx *fasthttp.RequestCtx) {
	r := &p.x.req
	r.readDeadline = time.Time{}
	if rt := p.g.cfg.Server.ReadTimeout; rt > 0 {
		r.readDeadline = ctx.Time().Add(rt)
	}
	r.lease, p.lease = p.lease, held{}
	func() {
		// A panic here is recovered by the engine's handler (engine.go).
		defer func() { r.takeLease().Release() }()
		if panicHook != nil {
			panicHook("resume", &ctx.Request.Header)
		}
		p.rt.final(ctx, r, p.res)
	}()
	p.end()
}

// Close ends a pending request the engine did not resume: the client left,
// or its body could not be set up (the engine's own answer is recorded).
func (p *pending) Close() error {
	if p.done {
		return nil
	}
	p.lease.Release()
	p.lease = held{}
	if s := p.x.req.ctx.Response.StatusCode(); s < http.StatusBadRequest {
		p.x.req.status = statusClientClosed
	}
	p.end()
	return nil
}

// end records the request and releases what it held.
func (p *pending) end() {
	if p.done {
		return
	}
	p.done = true
	p.g.finish(p.x, p.route)
	if p.counted {
		p.g.inflight.Add(-1)
	}
}
