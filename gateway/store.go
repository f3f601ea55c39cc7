package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/fallback"
)

// sharedStore is a store that successive gateways may share across reloads.
// The last gateway to release it closes it.
type sharedStore struct {
	ratelimit.Store
	closer io.Closer // nil when the store was injected (Deps.Store)
	// fallback is the on_error wrapper of a Redis store; nil for memory.
	fallback *fallback.Store
	spec     string // the store section it was built from
	// overrides are the admin API's per-key policies, kept with the store
	// so that they survive reloads as the limit state does.
	overrides *overrides
	// ping checks the store itself (Redis, behind the fallback); nil for memory.
	ping func(context.Context) error
	mu   sync.Mutex
	refs int
}

// acquire adds a user; it fails once the store has been closed.
func (s *sharedStore) acquire() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refs == 0 {
		return false
	}
	s.refs++
	return true
}

// release drops a user and closes the store when it was the last.
func (s *sharedStore) release() error {
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if last && s.overrides != nil {
		s.overrides.close()
	}
	if last && s.closer != nil {
		return s.closer.Close()
	}
	return nil
}

// openStore returns the store for cfg: the injected one, the previous
// gateway's when the store section is unchanged, or a new one.
func openStore(cfg *config.Config, deps Deps, m *metrics.Metrics, log *slog.Logger) (*sharedStore, error) {
	if deps.Store != nil {
		// An injected store that can hold a shared overrides table (a
		// Redis store) shares overrides too.
		shared, _ := deps.Store.(sharedOverrides)
		return &sharedStore{Store: deps.Store, refs: 1, overrides: newOverrides(shared, log)}, nil
	}
	// Two configs can share a store when they would build the same one. A
	// memory store depends only on store.memory; a Redis store (with its
	// local fallback) on all of the store section.
	spec := fmt.Sprintf("%#v", cfg.Store)
	if cfg.Store.Type == config.StoreMemory || cfg.Store.Type == "" {
		spec = fmt.Sprintf("%s %#v", config.StoreMemory, cfg.Store.Memory)
	}
	if p := deps.Previous; p != nil && p.store.closer != nil && p.store.spec == spec && p.store.acquire() {
		return p.store, nil
	}
	switch cfg.Store.Type {
	case config.StoreMemory, "":
		s, err := openMemory(memoryStoreName, cfg, deps.Clock, m, log)
		if err != nil {
			return nil, fmt.Errorf("gateway: memory store: %w", err)
		}
		return &sharedStore{Store: s.Store, closer: s, spec: spec, refs: 1, overrides: newOverrides(nil, log)}, nil
	case config.StoreRedis:
		return openRedis(cfg, spec, deps.Clock, m, log)
	default:
		return nil, fmt.Errorf("gateway: unknown store type %q", cfg.Store.Type)
	}
}
