package core

import (
	"context"

	"github.com/sluice-gw/sluice/gateway/internal/tracing"
	"github.com/sluice-gw/sluice/httplimit"
)

// spanKey is the request context's key of the request's *tracing.Span.
type spanKey struct{}

// traceDecision records each limit's verdict on the request's span.
func traceDecision(r *Request, ev *httplimit.Event) {
	if !r.span.On() {
		return
	}
	for i := range ev.Verdicts {
		v := &ev.Verdicts[i]
		r.span.Limit(v.Policy.Name(), string(v.Result), v.Decision.Remaining)
	}
	r.span.Decision(string(ev.Outcome))
}

// traceFallback records on the request's span that on_error mode decided
// in the place of the store of type store.
func traceFallback(ctx context.Context, store, mode string) {
	if s, _ := ctx.Value(spanKey{}).(*tracing.Span); s != nil {
		s.Store(store, mode)
	}
}
