package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/fallback"
	"github.com/sluice-gw/sluice/store/memory"
	"github.com/sluice-gw/sluice/store/redis"
)

// openRedis builds the Redis store the config describes, behind the
// store.on_error fallback (SPEC §5): a circuit breaker, and in local mode an
// in-memory store of this instance's own. It dials nothing: the Redis store
// connects on first use.
func openRedis(cfg *config.Config, spec string, clock ratelimit.Clock, m *metrics.Metrics, log *slog.Logger) (*sharedStore, error) {
	rc := cfg.Store.Redis
	opts := redis.Options{
		Mode:       redis.Mode(rc.Mode),
		Addrs:      rc.Addrs,
		MasterName: rc.MasterName,
		Username:   rc.Username,
		Password:   rc.Password,
		DB:         rc.DB,
		Prefix:     cfg.Store.Prefix,
		Timeout:    cfg.Store.Timeout,
	}
	if rc.TLS {
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	rs, err := redis.New(opts)
	if err != nil {
		return nil, fmt.Errorf("gateway: redis store: %w", err)
	}
	closers := closeAll{rs}
	mode := fallback.Mode(cfg.Store.OnError)
	var local ratelimit.Store
	if mode == fallback.Local || mode == "" {
		ls, err := memory.New(memory.Options{Clock: clock, MaxKeys: cfg.Store.Memory.MaxKeys})
		if err != nil {
			rs.Close()
			return nil, fmt.Errorf("gateway: local fallback store: %w", err)
		}
		local, closers = ls, append(closers, ls)
	}
	fb, err := fallback.New(fallback.Options{
		Primary:  rs,
		Local:    local,
		Mode:     mode,
		Timeout:  cfg.Store.Timeout,
		Classify: func(err error) (string, bool) { return redis.ErrorKind(err), true },
		Ping:     rs.Ping,
		Clock:    clock,
		OnStoreError: func(_ context.Context, kind string) {
			m.StoreError(metrics.ErrorKind(kind))
		},
		OnFallback: func(ctx context.Context, mode fallback.Mode) {
			m.FallbackDecision(routeOf(ctx), string(mode))
			noteFallback(ctx, string(mode))
		},
		OnStateChange: m.SetFallbackActive,
	})
	if err != nil {
		closers.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return &sharedStore{Store: fb, fallback: fb, closer: closers, spec: spec, refs: 1, overrides: newOverrides(rs, log), ping: rs.Ping}, nil
}

// closeAll closes each of its stores.
type closeAll []interface{ Close() error }

func (c closeAll) Close() error {
	var errs []error
	for _, s := range c {
		errs = append(errs, s.Close())
	}
	return errors.Join(errs...)
}

// routeKey is the context key under which a request carries its route id,
// for the fallback's per-route metric.
type routeKey struct{}

// withRoute returns ctx carrying route id.
func withRoute(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, routeKey{}, id)
}

// routeOf returns the route id ctx carries, or "".
func routeOf(ctx context.Context) string {
	id, _ := ctx.Value(routeKey{}).(string)
	return id
}
