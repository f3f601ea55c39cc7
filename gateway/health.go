package gateway

import (
	"log/slog"
	"sync"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/internal/healthcheck"
)

// healthChecks are a gateway's active health checks of its pools' targets
// (pool.health_check). Building a gateway dials nothing, so they start
// when a Server starts with the gateway or swaps it in (start), and stop
// when the gateway is closed (stop); a gateway built and closed without
// serving, as `sluice check` does, probes nothing.
type healthChecks struct {
	pools []healthcheck.Pool
	log   *slog.Logger

	mu      sync.Mutex
	checker *healthcheck.Checker
	closed  bool
}

// newHealthChecks returns the health checks of table's pools.
func newHealthChecks(table *core.Table, cfg *config.Config, log *slog.Logger) *healthChecks {
	return &healthChecks{pools: healthcheck.Pools(table, cfg, nil), log: log}
}

// start starts probing, once; after stop it does nothing.
func (h *healthChecks) start() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.checker != nil || len(h.pools) == 0 {
		return
	}
	h.checker = healthcheck.Start(h.pools, h.log)
}

// stop stops probing and waits for the probes to end.
func (h *healthChecks) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	h.checker.Stop()
}
