// Package gatewaytest builds and starts gateways for tests outside package
// gateway, so that no such test calls gateway.NewServer or Server.Start
// itself (internal/layout's test checks it; docs/layout.md, "The test
// kit"). Tests inside package gateway use that package's own kit
// (gateway/kit_test.go), which cannot import this one.
package gatewaytest

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
)

// ShutdownTimeout bounds the Shutdown that [Start] runs at cleanup.
const ShutdownTimeout = 5 * time.Second

// New builds a gateway from cfg and deps with gateway.New and closes it at
// tb's cleanup (Close is idempotent, so a Server's Shutdown having closed it
// first is harmless). It ends the test when gateway.New fails.
func New(tb testing.TB, cfg *config.Config, deps gateway.Deps) *gateway.Gateway {
	tb.Helper()
	g, err := gateway.New(cfg, deps)
	if err != nil {
		tb.Fatalf("gateway.New: %v", err)
	}
	tb.Cleanup(func() { g.Close() })
	return g
}

// Start serves g with gateway.NewServer(g, nil) and Start, on the listeners
// g's configuration names (tests use "127.0.0.1:0"; the Server's Addr,
// AdminAddr and RLSAddr give the bound addresses). At tb's cleanup it shuts
// the Server down, waiting at most [ShutdownTimeout] for requests still in
// flight. It ends the test when Start fails.
func Start(tb testing.TB, g *gateway.Gateway) *gateway.Server {
	tb.Helper()
	srv, err := gateway.NewServer(g, nil)
	if err != nil {
		tb.Fatalf("gateway: NewServer: %v", err)
	}
	if err := srv.Start(); err != nil {
		tb.Fatalf("gateway: Start: %v", err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			tb.Logf("gatewaytest: Shutdown cut off requests still running after %v: %v", ShutdownTimeout, err)
		}
	})
	return srv
}
