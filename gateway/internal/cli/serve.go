package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
)

// runServe loads the config, starts the listeners and handles signals until
// SIGINT/SIGTERM (graceful drain, exit 0) or a fatal serve error (exit 1).
func runServe(ctx context.Context, args []string, env Env) int {
	file, code, ok := configFlag("serve", args, "sluice.yaml", env)
	if !ok {
		return code
	}
	cfg, err := config.Load(file, env.LookupEnv)
	if err != nil {
		fmt.Fprintln(env.Stderr, errorLines(err))
		return exitError
	}
	lg := newLogs(env.Stderr, cfg.Log)
	log := lg.log
	rl := &reloader{file: file, env: env, logs: lg,
		deps: gateway.Deps{Logger: log, AccessLogger: lg.access, Build: buildInfo()}}
	rl.deps.Reload = rl.adminReload
	g, err := gateway.New(cfg, rl.deps)
	if err != nil {
		log.Error("building the gateway", "error", err)
		return exitError
	}
	// Subscribe before the listeners are up: a SIGHUP that arrives between
	// "listening" and the subscription would otherwise kill the process.
	sigs := env.Signals
	if sigs == nil {
		c := make(chan os.Signal, 4)
		signal.Notify(c, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(c)
		sigs = c
	}
	srv, err := gateway.NewServer(g, log)
	if err != nil {
		g.Close()
		log.Error("starting", "error", err)
		return exitError
	}
	rl.srv = srv
	if err := srv.Start(); err != nil {
		g.Close()
		log.Error("starting", "error", err)
		return exitError
	}
	g.RecordStart()
	log.Info("config loaded", "file", file, "routes", len(cfg.Routes), "store", cfg.Store.Type)
	w, err := rl.watch(cfg)
	if err != nil {
		log.Error("reload.watch: cannot watch the config files", "file", file, "error", err)
		shutdown(srv, log)
		return exitError
	}
	// stop ends the watch before the drain, so no reload races the shutdown.
	stop := func() int {
		if w != nil {
			w.Close()
		}
		return shutdown(srv, log)
	}
	if env.Started != nil {
		env.Started(srv.Addr().String(), srv.AdminAddr().String())
	}
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				rl.reload("SIGHUP") //nolint:errcheck // reload logs and counts its failures
				continue
			}
			log.Info("shutting down", "signal", sig.String())
			return stop()
		case <-ctx.Done():
			log.Info("shutting down", "reason", ctx.Err())
			return stop()
		case err := <-srv.Err():
			log.Error("serving", "error", err)
			stop()
			return exitError
		}
	}
}

// shutdown drains in-flight requests within server.shutdown_timeout.
func shutdown(srv *gateway.Server, log *slog.Logger) int {
	timeout := srv.Gateway().Config().Server.ShutdownTimeout
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		log.Warn("shutdown cut off requests still running", "timeout", timeout)
	}
	log.Info("stopped")
	return exitOK
}
