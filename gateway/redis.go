package gateway

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/fallback"
	"github.com/sluice-gw/sluice/store/redis"
)

// openRedis builds the Redis store the config describes, behind the
// store.on_error fallback (docs/semantics.md §6): a circuit breaker, and in
// local mode an in-memory store of this instance's own. It dials nothing: the
// Redis store connects on first use.
func openRedis(cfg *config.Config, section config.Store, clock ratelimit.Clock, m *metrics.Metrics, log *slog.Logger) (*sharedStore, error) {
	rc := cfg.Store.Redis
	opts := redis.Options{
		Mode:       redisMode(rc.Mode),
		Addrs:      rc.Addrs,
		MasterName: rc.MasterName,
		Username:   rc.Username,
		Password:   rc.Password,
		DB:         rc.DB,
		Prefix:     cfg.Store.Prefix,
		Timeout:    cfg.Store.Timeout,
		Logger:     log,

		SentinelUsername: rc.SentinelUsername,
		SentinelPassword: rc.SentinelPassword,
	}
	if rc.TLS {
		opts.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	rs, err := redis.New(opts)
	if err != nil {
		return nil, fmt.Errorf("gateway: redis store: %w", err)
	}
	closers := closeAll{rs}
	mode := fallbackMode(cfg.Store.OnError)
	var local ratelimit.Store
	if mode == fallback.Local || mode == "" {
		ls, err := openMemory(fallbackStoreName, cfg, clock, m, log)
		if err != nil {
			rs.Close()
			return nil, fmt.Errorf("gateway: local fallback store: %w", err)
		}
		local, closers = ls.Store, append(closers, ls)
	}
	// The last store failure, for the log line when the breaker opens.
	var lastErr atomic.Pointer[error]
	fb, err := fallback.New(fallback.Options{
		Primary: rs,
		Local:   local,
		Mode:    mode,
		Timeout: cfg.Store.Timeout,
		Classify: func(err error) (string, bool) {
			lastErr.Store(&err)
			return redis.ErrorKind(err), true
		},
		Ping:  rs.Ping,
		Clock: clock,
		OnStoreError: func(_ context.Context, kind string) {
			m.StoreError(metrics.ErrorKind(kind))
		},
		OnRenewFailure: func(error) { m.LeaseRenewFailure() },
		OnStateChange: func(active bool) {
			logFallback(log, cfg, active, lastErr.Load())
		},
		OnEngagedChange: m.SetFallbackActive,
	})
	if err != nil {
		closers.Close()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return &sharedStore{Store: fb, fb: fb, status: fallbackStatus{fb: fb, probe: rs.Ping, breaker: true},
		closer: closers, section: section, refs: 1, overrides: newOverrides(rs.SharedTable(overridesTable), log)}, nil
}

// redisMode returns store/redis's mode for store.redis.mode. Any other
// value, empty included, passes through as it is, for redis.New to apply its
// default (Standalone) to "" and refuse the rest.
func redisMode(m config.RedisMode) redis.Mode {
	switch m {
	case config.RedisStandalone:
		return redis.Standalone
	case config.RedisSentinel:
		return redis.Sentinel
	case config.RedisCluster:
		return redis.Cluster
	}
	return redis.Mode(m)
}

// logFallback says when decisions leave Redis (the breaker opened) and
// when they are back on it, so that an operator sees the fallback in the log
// as well as in sluice_fallback_active: at most one line per breaker
// transition, which the breaker's open interval spaces out.
func logFallback(log *slog.Logger, cfg *config.Config, active bool, last *error) {
	if !active {
		log.Info("redis store answers again: decisions are back on Redis")
		return
	}
	args := []any{"on_error", cmp.Or(cfg.Store.OnError, config.OnErrorLocal), "mode", cmp.Or(string(cfg.Store.Redis.Mode), "standalone"),
		"addrs", config.RedactAddresses(cfg.Store.Redis.Addrs)}
	if last != nil && *last != nil {
		args = append(args, "kind", redis.ErrorKind(*last), "error", *last)
	}
	log.Warn("redis store unavailable: deciding with the on_error fallback until it answers", args...)
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

// The Redis store holds the shared overrides table, also when injected.
var _ tableStore = (*redis.Store)(nil)
