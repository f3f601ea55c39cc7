package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/sluice-gw/sluice/config"
	"github.com/sluice-gw/sluice/gateway"
)

// runServe loads the config, starts the listeners and handles signals until
// SIGINT/SIGTERM (graceful drain, exit 0) or a fatal serve error (exit 1).
func runServe(ctx context.Context, args []string, env Env) int {
	file, code, ok := configFlag("serve", args, "sluice.yaml", env)
	if !ok {
		return code
	}
	log := newLogger(env.Stderr)
	cfg, err := config.Load(file, env.LookupEnv)
	if err != nil {
		fmt.Fprintln(env.Stderr, errorLines(err))
		return exitError
	}
	g, err := gateway.New(cfg, gateway.Deps{Logger: log})
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
	srv := gateway.NewServer(g, log)
	if err := srv.Start(); err != nil {
		g.Close()
		log.Error("starting", "error", err)
		return exitError
	}
	log.Info("config loaded", "file", file, "routes", len(cfg.Routes), "store", cfg.Store.Type)
	if env.Started != nil {
		env.Started(srv.Addr().String(), srv.AdminAddr().String())
	}
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGHUP {
				reload(file, srv, env, log)
				continue
			}
			log.Info("shutting down", "signal", sig.String())
			return shutdown(srv, log)
		case <-ctx.Done():
			log.Info("shutting down", "reason", ctx.Err())
			return shutdown(srv, log)
		case err := <-srv.Err():
			log.Error("serving", "error", err)
			shutdown(srv, log)
			return exitError
		}
	}
}

// reload builds a whole new gateway from file and swaps it in; on any error
// the old one keeps serving.
func reload(file string, srv *gateway.Server, env Env, log *slog.Logger) {
	old := srv.Gateway()
	cfg, err := config.Load(file, env.LookupEnv)
	if err != nil {
		log.Error("reload failed; keeping the running config", "file", file, "errors", errorLines(err))
		old.RecordReload(false)
		return
	}
	g, err := gateway.New(cfg, gateway.Deps{Logger: log, Registry: old.Registry(), Previous: old})
	if err != nil {
		log.Error("reload failed; keeping the running config", "file", file, "error", err)
		old.RecordReload(false)
		return
	}
	srv.Swap(g)
	g.RecordReload(true)
	log.Info("config reloaded", "file", file, "routes", len(cfg.Routes))
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
