package cli

import (
	"fmt"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
)

// runCheck validates a config file the way serve loads it, building the
// gateway too (which dials nothing), and prints every problem as
// FILE:LINE:COL: message to stderr, or a one-line summary to stdout after
// the config's warnings (FILE:LINE:COL: warning: message) on stderr, which
// do not fail the check.
func runCheck(args []string, env Env) int {
	file, code, ok := configFlag("check", args, "sluice.yaml", env)
	if !ok {
		return code
	}
	cfg, err := config.Load(file, env.LookupEnv)
	if err != nil {
		fmt.Fprintln(env.Stderr, errorLines(err))
		return exitError
	}
	g, err := gateway.New(cfg, gateway.Deps{})
	if err != nil {
		fmt.Fprintf(env.Stderr, "%s: %v\n", file, err)
		return exitError
	}
	g.Close()
	for _, w := range cfg.Warnings() {
		fmt.Fprintf(env.Stderr, "%s:%d:%d: warning: %s: %s\n", w.File, w.Line, w.Col, w.Path, w.Message)
	}
	fmt.Fprintln(env.Stdout, cfg.Summary(file))
	return exitOK
}
