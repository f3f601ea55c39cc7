package cli

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/internal/watch"
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
	rl.logs.apply(cfg.Log)
	log.Info("config reloaded", "file", rl.file, "by", by, "routes", len(cfg.Routes))
	return gateway.ReloadResult{File: rl.file, Routes: len(cfg.Routes)}, nil
}

// adminReload is gateway.Deps.Reload: POST /admin/v1/reload.
func (rl *reloader) adminReload(context.Context) (gateway.ReloadResult, error) {
	return rl.reload("admin API")
}

// watch starts reload.watch's watcher on the file, or returns nil when the
// configuration does not ask for one.
func (rl *reloader) watch(cfg *config.Config) (*watch.Watcher, error) {
	if !cfg.Reload.Watch {
		return nil, nil
	}
	w, err := watch.Start(watch.Options{
		File:     rl.file,
		Settle:   cfg.Reload.Settle,
		OnChange: func() { rl.reload("file watch") }, //nolint:errcheck // reload logs and counts its failures
		Logger:   rl.logs.log,
	})
	if err != nil {
		return nil, err
	}
	rl.logs.log.Info("watching the config file for changes", "file", rl.file)
	return w, nil
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
