package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/tracing"
)

// tracerShutdownTimeout bounds the export of a closing gateway's last spans.
const tracerShutdownTimeout = 5 * time.Second

// openTracer returns the gateway's tracer: deps.Tracer, or one built from
// the tracing section (own: Close shuts it down), or none when tracing is
// off.
func openTracer(cfg *config.Config, deps Deps) (t *tracing.Tracer, own bool, err error) {
	if deps.Tracer != nil {
		return deps.Tracer, false, nil
	}
	tc := cfg.Tracing
	if !tc.On() {
		return nil, false, nil
	}
	t, err = tracing.New(tracing.Options{Endpoint: tc.OTLPEndpoint, Sample: tc.SampleRatio(), Version: deps.Build.Version})
	if err != nil {
		return nil, false, err
	}
	return t, true, nil
}

// closeTracer exports the spans t still holds when the gateway owns it.
func closeTracer(t *tracing.Tracer, own bool, log *slog.Logger) {
	if !own {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), tracerShutdownTimeout)
	defer cancel()
	if err := t.Shutdown(ctx); err != nil {
		log.Warn("exporting the last trace spans", "error", err)
	}
}
