package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
	"github.com/sluice-gw/sluice/gateway/internal/watch"
)

// reloader reloads the configuration file into a running server. It is the
// one reload path: SIGHUP, POST /admin/v1/reload and reload.watch all call
// reload, which builds a whole new gateway and swaps it in, or keeps the
// running one when the file is broken. Reloads run one at a time.
type reloader struct {
	mu   sync.Mutex
	file string
	env  Env
	srv  *gateway.Server // set once the server exists, before any reload
	logs *logs
	// deps are the Deps every gateway of the process is built with
	// (Previous and Registry are filled in per reload).
	deps gateway.Deps
	// watches are reload.watch's watchers, nil when it is off.
	watches *watchSet
}

// reload loads the file and swaps the gateway built from it in. by names
// what asked ("SIGHUP", "admin API", "file watch") in the log. The reload
// metrics are recorded before the outcome is logged, so that whoever reads
// the log line finds them up to date. It returns
// the problems of a file that was not swapped in, as `sluice check` prints
// them.
func (rl *reloader) reload(by string) (gateway.ReloadResult, error) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	log := rl.logs.log
	old := rl.srv.Gateway()
	cfg, err := config.Load(rl.file, rl.env.LookupEnv)
	if err != nil {
		lines := errorLines(err)
		old.RecordReload(false)
		log.Error("reload failed; keeping the running config", "file", rl.file, "by", by, "errors", lines)
		return gateway.ReloadResult{}, errors.New(lines)
	}
	deps := rl.deps
	deps.Registry, deps.Previous = old.Registry(), old
	g, err := gateway.New(cfg, deps)
	if err != nil {
		old.RecordReload(false)
		log.Error("reload failed; keeping the running config", "file", rl.file, "by", by, "error", err)
		return gateway.ReloadResult{}, err
	}
	rl.srv.Swap(g)
	g.RecordReload(true)
	if rl.watches != nil {
		rl.watches.update(watchPaths(rl.file, cfg))
	}
	rl.logs.apply(cfg.Log)
	log.Info("config reloaded", "file", rl.file, "by", by, "routes", len(cfg.Routes))
	return gateway.ReloadResult{File: rl.file, Routes: len(cfg.Routes)}, nil
}

// adminReload is gateway.Deps.Reload: POST /admin/v1/reload.
func (rl *reloader) adminReload(context.Context) (gateway.ReloadResult, error) {
	return rl.reload("admin API")
}

// watch starts reload.watch's watchers on the config file and on the
// envoyproxy/ratelimit files its rls section read, or returns nil when the
// configuration does not ask for them. After each reload the watched files
// follow the new configuration.
func (rl *reloader) watch(cfg *config.Config) (*watchSet, error) {
	if !cfg.Reload.Watch {
		return nil, nil
	}
	// Under the reload lock, from the configuration in force: a reload
	// through the admin API may already have replaced cfg. A failure is
	// cleaned up after the lock is released, as a watcher that saw a
	// change is waiting for it.
	rl.mu.Lock()
	ws := &watchSet{log: rl.logs.log, byPath: map[string]*watch.Watcher{}, settle: cfg.Reload.Settle,
		onChange: func() { rl.reload("file watch") }} //nolint:errcheck // reload logs and counts its failures
	var err error
	for _, p := range watchPaths(rl.file, rl.srv.Gateway().Config()) {
		if err = ws.add(p); err != nil {
			break
		}
	}
	if err == nil {
		rl.watches = ws
	}
	n := len(ws.byPath)
	rl.mu.Unlock()
	if err != nil {
		ws.Close() //nolint:errcheck // err says what went wrong
		return nil, err
	}
	rl.logs.log.Info("watching the config file for changes", "file", rl.file, "files", n)
	return ws, nil
}

// watchPaths returns the files reload.watch follows for cfg, read from
// file: the config file, then each envoyproxy/ratelimit file of
// rls.envoy_config (those of a directory as they were when it was read).
func watchPaths(file string, cfg *config.Config) []string {
	paths := []string{file}
	if cfg.RLS == nil {
		return paths
	}
	for _, d := range cfg.RLS.AllDomains() {
		if d.File != "" && !slices.Contains(paths, d.File) {
			paths = append(paths, d.File)
		}
	}
	return paths
}

// watchSet is a watcher per watched file; each change reloads. It is safe
// for concurrent use.
type watchSet struct {
	log      *slog.Logger
	settle   time.Duration // reload.settle at start
	onChange func()
	mu       sync.Mutex
	byPath   map[string]*watch.Watcher
	closed   bool
	closing  sync.WaitGroup // watchers of files no longer watched, closing
}

// add starts watching path.
func (ws *watchSet) add(path string) error {
	w, err := watch.Start(watch.Options{File: path, Settle: ws.settle, OnChange: ws.onChange, Logger: ws.log})
	if err != nil {
		return err
	}
	ws.byPath[path] = w
	return nil
}

// update watches paths and stops watching the other files. A file that
// cannot be watched is logged and left out. A watcher stops in the
// background: it may be the one whose change is being reloaded.
func (ws *watchSet) update(paths []string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if ws.closed {
		return
	}
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
		if ws.byPath[p] != nil {
			continue
		}
		if err := ws.add(p); err != nil {
			ws.log.Warn("reload.watch: cannot watch a file of the config", "file", p, "error", err)
		}
	}
	for p, w := range ws.byPath {
		if !want[p] {
			delete(ws.byPath, p)
			ws.closing.Go(func() { w.Close() }) //nolint:errcheck // nothing to do about it
		}
	}
}

// Close stops every watcher and waits until none is calling onChange.
func (ws *watchSet) Close() error {
	ws.mu.Lock()
	ws.closed = true
	all := ws.byPath
	ws.byPath = nil
	ws.mu.Unlock()
	var errs []error
	for _, w := range all {
		errs = append(errs, w.Close())
	}
	ws.closing.Wait()
	return errors.Join(errs...)
}

// logs are the process's loggers, built from the log section.
type logs struct {
	log    *slog.Logger // the process log, filtered by level
	access *slog.Logger // the access log: same format, every record
	level  *slog.LevelVar
	format string
}

// newLogs returns the loggers of the log section, writing to w.
func newLogs(w io.Writer, l config.Log) *logs {
	lg := &logs{level: new(slog.LevelVar), format: l.Format}
	lg.level.Set(levelOf(l.Level))
	lg.log = slog.New(newHandler(w, l.Format, lg.level))
	lg.access = slog.New(newHandler(w, l.Format, slog.LevelInfo))
	return lg
}

// newHandler returns a text or JSON handler (log.format) at level.
func newHandler(w io.Writer, format string, level slog.Leveler) slog.Handler {
	o := &slog.HandlerOptions{Level: level}
	if format == config.LogJSON {
		return slog.NewJSONHandler(w, o)
	}
	return slog.NewTextHandler(w, o)
}

// apply takes a reloaded log section: the level at once; a new format
// only at the next start, which it says.
func (lg *logs) apply(l config.Log) {
	lg.level.Set(levelOf(l.Level))
	if l.Format != lg.format {
		lg.log.Warn("log.format changed; restart sluice to apply", "format", l.Format)
	}
}

// levelOf maps log.level to a slog level; the config validated it.
func levelOf(level string) slog.Level {
	switch level {
	case config.LogDebug:
		return slog.LevelDebug
	case config.LogWarn:
		return slog.LevelWarn
	case config.LogError:
		return slog.LevelError
	}
	return slog.LevelInfo
}
