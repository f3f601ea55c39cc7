package gateway

import (
	"cmp"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/metrics"
	"github.com/sluice-gw/sluice/ratelimit"
	"github.com/sluice-gw/sluice/store/memory"
)

// keyCapQuiet is how long an in-process store goes without an overflow
// before its next overflow is logged again.
const keyCapQuiet = time.Hour

// In-process store names, the store label of sluice_store_keys and
// sluice_store_key_overflow_total.
const (
	memoryStoreName   = "memory"   // store.type memory
	fallbackStoreName = "fallback" // the local fallback of a Redis store
)

// memoryStore is an in-process store whose key count is reported to
// metrics until it closes.
type memoryStore struct {
	*memory.Store
	unwatch func()
}

// Close stops reporting the store's keys and closes it.
func (s memoryStore) Close() error {
	s.unwatch()
	return s.Store.Close()
}

// openMemory opens the in-process store name with store.memory's cap: its
// key count goes to sluice_store_keys, each overflow (a limit decided
// against a shared overflow budget because the cap was reached) to
// sluice_store_key_overflow_total, and the log hears of the overflows as
// keyCap says (docs/operations.md, "The key cap").
func openMemory(name string, cfg *config.Config, clock ratelimit.Clock, m *metrics.Metrics, log *slog.Logger) (memoryStore, error) {
	kc := &keyCap{store: name, maxKeys: cmp.Or(cfg.Store.Memory.MaxKeys, memory.DefaultMaxKeys), m: m, log: log, clock: clock}
	if kc.clock == nil {
		kc.clock = ratelimit.SystemClock{}
	}
	s, err := memory.New(memory.Options{Clock: clock, MaxKeys: cfg.Store.Memory.MaxKeys, OnOverflow: kc.overflowed})
	if err != nil {
		return memoryStore{}, err
	}
	return memoryStore{Store: s, unwatch: m.WatchStoreKeys(name, func() int { return s.Stats().Keys })}, nil
}

// keyCap counts an in-process store's overflows and logs a WARN at the first
// one and at the first after keyCapQuiet without any: one line when the cap
// is reached, not one per request, and one again for a later episode. It is
// safe for concurrent use.
type keyCap struct {
	store   string
	maxKeys int
	m       *metrics.Metrics
	log     *slog.Logger
	clock   ratelimit.Clock
	last    atomic.Int64 // Unix ns of the last overflow; 0: none yet
}

// overflowed is the store's Options.OnOverflow.
func (k *keyCap) overflowed(n int) {
	k.m.StoreKeyOverflow(k.store, n)
	now := k.clock.Now().UnixNano()
	if prev := k.last.Swap(now); prev != 0 && now-prev < int64(keyCapQuiet) {
		return
	}
	msg := "store.memory.max_keys reached: new keys share one overflow budget per policy until idle keys expire"
	if k.store == fallbackStoreName {
		// The fallback mirrors what Redis decides: the overflow matters
		// only once it decides, during an outage.
		msg = "store.memory.max_keys reached in the local fallback: while Redis cannot be used, new keys share one overflow budget per policy until idle keys expire"
	}
	k.log.Warn(msg, "store", k.store, "max_keys", k.maxKeys)
}
