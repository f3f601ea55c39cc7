package fastengine

import (
	"net/http"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/internal/panichook"
	"github.com/sluice-gw/sluice/gateway/metrics"
)

// A request with Expect: 100-continue is decided once, before the engine
// sends 100 Continue: the engine's ExpectHandler (Handler.Expect)
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
	h     *Handler
	x     *exchange
	route string // the id of the route that admitted it
	out   core.Outcome
	// done is called once the request has ended (Server's in-flight count).
	release func()
	ended   bool
}

// Expect decides a request that carries Expect: 100-continue: it is the
// engine's ExpectHandler. It returns 100 when the limits admit it, having
// kept it (with its leases) for Serve to resume once the body is there,
// and release is called when the request ends; otherwise it returns the
// status of the final answer it wrote into ctx's response, and release
// has been called.
func (h *Handler) Expect(ctx *fasthttp.RequestCtx, release func()) int {
	// The engine sets the request's time after this call: the request
	// starts now.
	now := time.Now()
	x := h.begin(ctx, now)
	if x.readDeadline.IsZero() && h.readHeaderTimeout > 0 {
		// Until the body's first byte, the headers' deadline holds (a
		// shape-mode hold's watch restores this one).
		x.readDeadline = now.Add(h.readHeaderTimeout)
	}
	route, out, ok := h.expectRecovering(ctx, x)
	if !ok {
		h.finish(x, route)
		release()
		return ctx.Response.StatusCode()
	}
	p := &pending{h: h, x: x, route: route, out: out, release: release}
	ctx.SetUserValue(pendingKey{}, p)
	return fasthttp.StatusContinue
}

// expectRecovering decides x as serveRecovering serves it: a request the
// limits admit is returned with ok, to be resumed; any other is answered
// now.
func (h *Handler) expectRecovering(ctx *fasthttp.RequestCtx, x *exchange) (route string, out core.Outcome, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			door := metrics.DoorGateway
			if x.Forwarded() {
				door = metrics.DoorForwardAuth
			}
			h.panics.Record(door, v)
			out.Lease.Release()
			x.takeLease().Release()
			x.Req.SetStatus(0)
			answerPanic(ctx)
			route, ok = "", false
		}
	}()
	out = h.decide(ctx, x)
	if out.Route != nil {
		route = out.Route.ID()
	}
	if out.Admitted {
		return route, out, true
	}
	x.lease = out.Lease
	defer func() { x.takeLease().Release() }()
	h.carryOut(ctx, x, &out)
	return route, core.Outcome{}, false
}

// resume carries out the admitted request p (its route's upstream, fixed
// answer or forward-auth verdict), once the engine has sent 100 Continue
// and the body is there to read.
func (p *pending) resume(ctx *fasthttp.RequestCtx) {
	x := p.x
	x.readDeadline = time.Time{}
	if rt := p.h.readTimeout; rt > 0 {
		x.readDeadline = ctx.Time().Add(rt)
	}
	x.lease, p.out.Lease = p.out.Lease, core.Held{}
	func() {
		// A panic here is recovered by the engine's handler (engine.go).
		defer func() { x.takeLease().Release() }()
		if panichook.Hook != nil {
			panichook.Hook("resume", &ctx.Request.Header)
		}
		p.h.carryOut(ctx, x, &p.out)
	}()
	p.end()
}

// Close ends a pending request the engine did not resume: the client left,
// or its body could not be set up (the engine's own answer is recorded).
func (p *pending) Close() error {
	if p.ended {
		return nil
	}
	p.out.Lease.Release()
	p.out.Lease = core.Held{}
	if s := p.x.ctx.Response.StatusCode(); s < http.StatusBadRequest {
		p.x.Req.SetStatus(core.StatusClientClosed)
	}
	p.end()
	return nil
}

// end records the request and releases what it held.
func (p *pending) end() {
	if p.ended {
		return
	}
	p.ended = true
	p.h.finish(p.x, p.route)
	p.release()
}
