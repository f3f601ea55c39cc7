package fastengine

import (
	"log/slog"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/internal/testkit"
)

// This file is package fastengine's in-package test kit (docs/layout.md,
// "The test kit"): the tests of the public server's own behaviour build and
// serve it here.

// serveEngine builds the public server (newPublicServer) from handler,
// expect, sc and o, serves it on a loopback listener from testkit and
// returns the listener's address ("127.0.0.1:port"). o.Log nil discards the
// logs, as NewServer does; o.Metrics nil counts into a registry of the
// server's own. At tb's cleanup it shuts the server
// down (closing the connections still open) and waits for it to stop
// serving.
func serveEngine(tb testing.TB, handler fasthttp.RequestHandler, expect func(*fasthttp.RequestCtx) int, sc config.Server, o ServerOptions) string {
	tb.Helper()
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Metrics == nil {
		m, err := metrics.New(metrics.NewRegistry())
		if err != nil {
			tb.Fatal(err)
		}
		o.Metrics = m
	}
	ps := newPublicServer(handler, expect, sc, o)
	addr := testkit.Serve(tb, ps.Serve)
	tb.Cleanup(func() { ps.Shutdown() }) // runs before testkit's: the connections close first
	return addr
}
