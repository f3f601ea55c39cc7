package gateway

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/core"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/fallback"
	"github.com/sluice-gw/sluice/store/localdeny"
)

// storeStatus is what the gateway reads about its store besides its
// decisions. The store wiring (this file and redis.go) implements it; the
// rest of the gateway never asks which kind of store it holds.
type storeStatus interface {
	// Ready reports whether the instance should take traffic (/readyz),
	// as store.on_error has it.
	Ready(ctx context.Context) bool
	// Probe checks that the store itself answers (Redis, not its fallback).
	Probe(ctx context.Context) error
	// Engaged reports whether requests are being decided without the
	// store: sluice_fallback_active.
	Engaged() bool
	// Breaker returns the state of the store's circuit breaker: "closed",
	// "open", or "none" for a store without one.
	Breaker() string
}

// sharedStore is the gateway's one store handle: the store that decides,
// with store.on_error applied (a fallback.Store around any primary), and
// its status. Successive gateways may share it across reloads; the last
// gateway to release it closes it.
type sharedStore struct {
	ratelimit.Store
	status storeStatus
	fb     *fallback.Store // the Store, or the store below deny, for its per-route views
	// deny, when store.local_deny is on (Redis stores only), is the Store:
	// it answers requests for keys known denied before fb is asked.
	deny   *localdeny.Store
	closer io.Closer // nil when the store was injected (Deps.Store)
	// section is the store section it was built from (see sameStore).
	section config.Store
	// overrides are the admin API's per-key policies, kept with the store
	// so that they survive reloads as the limit state does.
	overrides *overrides
	mu        sync.Mutex
	refs      int
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

// routeStore returns the store as route decides on it: each of its
// decisions made without the primary is counted and marked in the access
// log (fellBack), each store call is timed (meteredStore), and with
// store.local_deny a request for a key known denied is answered before
// either, counted in sluice_local_deny_decisions_total and logged as
// store=local_deny.
func (s *sharedStore) routeStore(route, storeType string, m *metrics.Metrics) ratelimit.Store {
	var st ratelimit.Store = meteredStore{Store: s.fb.Observed(fellBack(m, storeType, route)), metrics: m}
	if s.deny == nil {
		return st
	}
	return s.deny.Over(st, func(ctx context.Context) {
		m.LocalDenyDecision(route)
		core.NoteSource(ctx, localDenySource)
	})
}

// leaseStore returns the store every route's leases and the shedding
// budget's are released and renewed on: the same comparable value for all,
// so that each renewal renews them all in one call (httplimit.Options.Leases).
// Releases and renewals need neither a route's fallback counting nor
// store.local_deny, which pass them through.
func (s *sharedStore) leaseStore(m *metrics.Metrics) meteredStore {
	return meteredStore{Store: s.fb, metrics: m}
}

// localDenySource is the access log's store field for a request answered
// by store.local_deny.
const localDenySource = "local_deny"

// withLocalDeny puts s's store behind store/localdeny when ld says so
// (docs/semantics.md §6.6). Denials are not remembered while the fallback
// decides (fb.Engaged): a local fallback's denial counts this instance's
// traffic only.
func (s *sharedStore) withLocalDeny(ld config.LocalDeny) error {
	if !ld.On() {
		return nil
	}
	d, err := localdeny.New(localdeny.Options{Store: s.fb, MaxKeys: ld.MaxKeys, Skip: s.fb.Engaged})
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	s.Store, s.deny = d, d
	return nil
}

// openStore returns the store for cfg: the injected one, the previous
// gateway's when the store section is unchanged, or a new one.
func openStore(cfg *config.Config, deps Deps, m *metrics.Metrics, log *slog.Logger) (*sharedStore, error) {
	if deps.Store != nil {
		// An injected store that can hold a shared table (a Redis store)
		// shares overrides too.
		var shared sharedTable
		if ts, ok := deps.Store.(tableStore); ok {
			shared = ts.SharedTable(overridesTable)
		}
		s, err := openInProcess(deps.Store, cfg, m, log)
		if err != nil {
			return nil, err
		}
		s.overrides = newOverrides(shared, log)
		return s, nil
	}
	if p := deps.Previous; p != nil && p.store.closer != nil && sameStore(&p.store.section, &cfg.Store) && p.store.acquire() {
		return p.store, nil
	}
	section := cfg.Store
	section.Redis.Addrs = slices.Clone(section.Redis.Addrs)
	switch cfg.Store.Type {
	case config.StoreMemory, "":
		ms, err := openMemory(memoryStoreName, cfg, deps.Clock, m, log)
		if err != nil {
			return nil, fmt.Errorf("gateway: memory store: %w", err)
		}
		s, err := openInProcess(ms.Store, cfg, m, log)
		if err != nil {
			ms.Close()
			return nil, err
		}
		s.closer, s.section, s.overrides = ms, section, newOverrides(nil, log)
		return s, nil
	case config.StoreRedis:
		s, err := openRedis(cfg, section, deps.Clock, m, log)
		if err != nil {
			return nil, err
		}
		if err := s.withLocalDeny(cfg.Store.LocalDeny); err != nil {
			s.release()
			return nil, err
		}
		return s, nil
	default:
		return nil, fmt.Errorf("gateway: unknown store type %q", cfg.Store.Type)
	}
}

// sameStore reports whether configurations with the store sections a and b
// build the same store, so that a reload can keep it and every key's
// budget. A memory store depends only on store.memory; a Redis store (with
// its local fallback and local denials) on all of the section.
func sameStore(a, b *config.Store) bool {
	memory := func(s *config.Store) bool { return s.Type == config.StoreMemory || s.Type == "" }
	if memory(a) || memory(b) {
		return memory(a) && memory(b) && a.Memory == b.Memory
	}
	ra, rb := &a.Redis, &b.Redis
	return a.Type == b.Type && a.Prefix == b.Prefix && a.Timeout == b.Timeout && a.OnError == b.OnError &&
		a.Memory == b.Memory &&
		ra.Mode == rb.Mode && slices.Equal(ra.Addrs, rb.Addrs) && ra.MasterName == rb.MasterName &&
		ra.Username == rb.Username && ra.Password == rb.Password &&
		ra.SentinelUsername == rb.SentinelUsername && ra.SentinelPassword == rb.SentinelPassword &&
		ra.DB == rb.DB && ra.TLS == rb.TLS &&
		a.LocalDeny.On() == b.LocalDeny.On() && a.LocalDeny.MaxKeys == b.LocalDeny.MaxKeys
}

// fallbackMode returns store/fallback's mode for store.on_error. Any other
// value, empty included, passes through as it is, for fallback.New to apply
// its default (Local) to "" and refuse the rest.
func fallbackMode(m config.OnError) fallback.Mode {
	switch m {
	case config.OnErrorLocal:
		return fallback.Local
	case config.OnErrorAllow:
		return fallback.Allow
	case config.OnErrorDeny:
		return fallback.Deny
	}
	return fallback.Mode(m)
}

// openInProcess puts an in-process store (memory, or one injected for
// tests) behind store/fallback, which applies store.on_error to its
// failures as it does to Redis's: allow admits uncounted, deny answers 503,
// and local, having no store more local, answers 503 too.
func openInProcess(primary ratelimit.Store, cfg *config.Config, m *metrics.Metrics, log *slog.Logger) (*sharedStore, error) {
	mode := fallbackMode(cfg.Store.OnError)
	probe := func(ctx context.Context) error {
		var out [1]ratelimit.Decision
		return primary.Peek(ctx, []ratelimit.Request{{Key: "sluice-readyz", Policy: readyPolicy}}, out[:])
	}
	fb, err := fallback.New(fallback.Options{
		Primary:   primary,
		Mode:      mode,
		InProcess: true,
		Classify: func(err error) (string, bool) {
			// No breaker opening announces an in-process store's
			// failures: each is logged.
			log.Warn("store failed", "on_error", cmp.Or(mode, fallback.Local), "error", err)
			return string(errorKind(err)), true
		},
		Ping: probe,
		OnStoreError: func(_ context.Context, kind string) {
			m.StoreError(metrics.ErrorKind(kind))
		},
		OnRenewFailure:  func(error) { m.LeaseRenewFailure() },
		OnEngagedChange: m.SetFallbackActive,
	})
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return &sharedStore{Store: fb, fb: fb, status: fallbackStatus{fb: fb, probe: probe}, refs: 1}, nil
}

// fallbackStatus is the status of a store behind store/fallback.
type fallbackStatus struct {
	fb    *fallback.Store
	probe func(context.Context) error
	// breaker is whether fb calls a remote primary through its breaker.
	breaker bool
}

func (s fallbackStatus) Ready(ctx context.Context) bool  { return s.fb.Ready(ctx) }
func (s fallbackStatus) Probe(ctx context.Context) error { return s.probe(ctx) }
func (s fallbackStatus) Engaged() bool                   { return s.fb.Engaged() }

func (s fallbackStatus) Breaker() string {
	switch {
	case !s.breaker:
		return "none"
	case s.fb.Active():
		return "open"
	}
	return "closed"
}
