package gateway

import (
	"context"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gw/sluice/gateway/admin"
)

// overridePoll is how often an instance re-reads a shared overrides table,
// so that a change made on another instance is in force here within
// overridePoll plus one store round trip, well within the 1 s that
// docs/operations.md ("Admin API") promises.
const overridePoll = 250 * time.Millisecond

// sharedTable is a table of fields and values that several instances
// share, versioned so that readers poll it cheaply: the Redis store's
// SharedTable. A nil sharedTable means the overrides live in this process
// only. It is an alias of the interface literal redis.Store.SharedTable
// returns, so that tableStore matches that method.
type sharedTable = interface {
	Set(ctx context.Context, field, value string) (version int64, err error)
	Delete(ctx context.Context, field string) (existed bool, version int64, err error)
	Load(ctx context.Context, since int64) (version int64, table map[string]string, changed bool, err error)
}

// tableStore is a store that can hold shared tables (the Redis store).
type tableStore interface {
	SharedTable(name string) sharedTable
}

// overridesTable is the name of the shared table of overrides.
const overridesTable = "overrides"

// overrides holds the admin API's per-key policies: a snapshot read on every
// request without locks, kept in step with the shared table (if any) by a
// poller. It belongs to the sharedStore, so it survives reloads like the
// limit state does. It is safe for concurrent use.
type overrides struct {
	shared sharedTable // nil: this process only
	log    *slog.Logger

	cur     atomic.Pointer[map[string]string] // field -> policy name; never modified once stored
	mu      sync.Mutex                        // serializes writes and refreshes
	version int64                             // of cur, for shared tables; -1 before the first load
	loaded  atomic.Bool                       // cur reflects the shared table at least once
	failing bool                              // the last refresh failed (logged once)

	start sync.Once
	stop  chan struct{}
	done  chan struct{}
}

// newOverrides returns the table: following shared, or in process when
// shared is nil. log nil discards the table's logs.
func newOverrides(shared sharedTable, log *slog.Logger) *overrides {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	o := &overrides{shared: shared, log: log, version: -1, stop: make(chan struct{}), done: make(chan struct{})}
	empty := map[string]string{}
	o.cur.Store(&empty)
	if shared == nil {
		o.loaded.Store(true)
	}
	return o
}

// Lookup returns the policy name set for parts on route, or "". It never
// blocks: it reads the latest snapshot.
func (o *overrides) Lookup(route string, parts []string) string {
	o.ensureStarted()
	m := *o.cur.Load()
	if len(m) == 0 {
		return ""
	}
	var buf [128]byte
	return m[string(admin.AppendField(buf[:0], route, parts))]
}

// List returns every override, sorted by route then key.
func (o *overrides) List() []admin.Override {
	o.ensureStarted()
	m := *o.cur.Load()
	out := make([]admin.Override, 0, len(m))
	for _, f := range slices.Sorted(maps.Keys(m)) {
		if route, parts, ok := admin.ParseField(f); ok {
			out = append(out, admin.Override{Route: route, Key: parts, Policy: m[f]})
		}
	}
	return out
}

// Set makes policy the override for parts on route, in the shared table
// first; this instance sees it at once.
func (o *overrides) Set(ctx context.Context, route string, parts []string, policy string) error {
	f := admin.Field(route, parts)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.shared != nil {
		if _, err := o.shared.Set(ctx, f, policy); err != nil {
			return err
		}
		return o.refreshLocked(ctx)
	}
	m := maps.Clone(*o.cur.Load())
	m[f] = policy
	o.cur.Store(&m)
	return nil
}

// Remove deletes the override for parts on route and reports whether there was one.
func (o *overrides) Remove(ctx context.Context, route string, parts []string) (bool, error) {
	f := admin.Field(route, parts)
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.shared != nil {
		existed, _, err := o.shared.Delete(ctx, f)
		if err != nil {
			return false, err
		}
		return existed, o.refreshLocked(ctx)
	}
	m := maps.Clone(*o.cur.Load())
	_, existed := m[f]
	delete(m, f)
	o.cur.Store(&m)
	return existed, nil
}

// refresh re-reads the shared table if it changed.
func (o *overrides) refresh(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.refreshLocked(ctx)
}

func (o *overrides) refreshLocked(ctx context.Context) error {
	if o.shared == nil {
		return nil
	}
	v, table, changed, err := o.shared.Load(ctx, o.version)
	if err != nil {
		if !o.failing {
			o.log.Warn("overrides: cannot read the shared table; keeping the last one read", "error", err)
		}
		o.failing = true
		return err
	}
	if o.failing {
		o.log.Info("overrides: shared table readable again")
	}
	o.failing = false
	if changed {
		o.cur.Store(&table)
	}
	o.version = v
	o.loaded.Store(true)
	return nil
}

// ensureStarted starts the poller of a shared table on first use. Building
// a gateway dials nothing, so the poller starts with the first request, the
// first admin call or Server.Start, whichever comes first; the first load
// happens synchronously (bounded by the store's timeout) so that overrides
// already in the table apply to the very first request.
func (o *overrides) ensureStarted() {
	if o.shared == nil {
		return
	}
	o.start.Do(func() {
		o.refresh(context.Background())
		go o.poll()
	})
}

func (o *overrides) poll() {
	defer close(o.done)
	t := time.NewTicker(overridePoll)
	defer t.Stop()
	for {
		select {
		case <-o.stop:
			return
		case <-t.C:
			o.refresh(context.Background())
		}
	}
}

// close stops the poller, if it runs.
func (o *overrides) close() {
	started := true
	o.start.Do(func() { started = false })
	close(o.stop)
	if started && o.shared != nil {
		<-o.done
	}
}

var _ admin.Overrides = (*overrides)(nil)
