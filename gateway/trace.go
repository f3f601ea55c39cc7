package gateway

import (
	"context"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/httplimit"
	"github.com/sluice-gw/sluice/internal/tracing"
)

// spanKey is the request context's key of the request's *tracing.Span.
type spanKey struct{}

// tracerShutdownTimeout bounds the export of a closing gateway's last spans.
const tracerShutdownTimeout = 5 * time.Second

// openTracer sets the gateway's tracer: deps.Tracer, or one built from the
// tracing section, or none when tracing is off.
func (g *Gateway) openTracer(deps Deps) error {
	if deps.Tracer != nil {
		g.tracer = deps.Tracer
		return nil
	}
	tc := g.cfg.Tracing
	if !tc.On() {
		return nil
	}
	t, err := tracing.New(tracing.Options{Endpoint: tc.OTLPEndpoint, Sample: tc.SampleRatio(), Version: deps.Build.Version})
	if err != nil {
		return err
	}
	g.tracer, g.ownTracer = t, true
	return nil
}

// closeTracer exports the spans the gateway's own tracer still holds.
func (g *Gateway) closeTracer() {
	if !g.ownTracer {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracerShutdownTimeout)
	defer cancel()
	if err := g.tracer.Shutdown(ctx); err != nil {
		g.log.Warn("exporting the last trace spans", "error", err)
	}
}

// startSpan starts r's span at now, continuing the trace of the request's
// traceparent if it has one.
func (g *Gateway) startSpan(ctx *fasthttp.RequestCtx, r *publicRequest, now time.Time) {
	h := &ctx.Request.Header
	r.span = g.tracer.Start(methodString(h.Method()), string(ctx.Path()), func(name string) string {
		return string(h.Peek(name))
	}, now)
	r.span.Store(g.cfg.Store.Type, "")
}

// traceDecision records each limit's verdict on the request's span.
func (g *Gateway) traceDecision(r httplimit.Request, ev *httplimit.Event) {
	pr, ok := r.(*publicRequest)
	if !ok || !pr.span.On() {
		return
	}
	for i := range ev.Verdicts {
		v := &ev.Verdicts[i]
		pr.span.Limit(v.Policy.Name(), string(v.Result), v.Decision.Remaining)
	}
	pr.span.Decision(string(ev.Outcome))
}

// traceFallback records on the request's span that on_error mode decided
// in the store's place.
func (g *Gateway) traceFallback(ctx context.Context, mode string) {
	if s, _ := ctx.Value(spanKey{}).(*tracing.Span); s != nil {
		s.Store(g.cfg.Store.Type, mode)
	}
}

// injectTrace replaces the client's trace headers on the request sent
// upstream with the span's, so the upstream's spans are its children.
func injectTrace(oh *fasthttp.RequestHeader, s *tracing.Span) {
	oh.Del("Traceparent")
	oh.Del("Tracestate")
	s.Inject(func(name, value string) { oh.Set(name, value) })
}
