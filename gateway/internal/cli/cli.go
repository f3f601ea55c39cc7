// Package cli implements sluice's commands: serve, check, simulate, import and version. Run
// parses the arguments, does the work and returns the process exit code;
// only this package and cmd/sluice touch arguments, the environment and
// signals.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/sluice-gw/sluice/gateway"
	"github.com/sluice-gw/sluice/gateway/config"
)

// Version and Commit identify the build. Release builds set them with
// -ldflags "-X github.com/sluice-gw/sluice/gateway/internal/cli.Version=v1.2.3
// -X github.com/sluice-gw/sluice/gateway/internal/cli.Commit=abc1234"; otherwise
// they come from the module build info when there is any.
var (
	Version = "dev"
	Commit  = "unknown"
)

// Env is what a command takes from the process. Stdout and Stderr must be
// set; LookupEnv nil means os.LookupEnv; Signals nil means the process's
// SIGINT, SIGTERM and SIGHUP.
type Env struct {
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
	// Signals delivers SIGINT/SIGTERM (drain and exit) and SIGHUP (reload).
	Signals <-chan os.Signal
	// Started, if not nil, is called once the listeners are bound, with their
	// addresses (for tests that listen on port 0).
	Started func(public, admin string)
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // invalid config, serve failure
	exitUsage = 2
)

const usage = `usage:
  sluice [serve] [--config FILE]   run the gateway (FILE defaults to sluice.yaml)
  sluice check --config FILE       validate a config; print every problem
  sluice simulate [flags]          run policies against traffic on virtual time (see -h)
  sluice import scg FILE...        translate Spring Cloud Gateway's config (see -h)
  sluice version                   print the version (also --version)
  sluice help [COMMAND]            print this list, or COMMAND's help (also -h, --help)

-c is short for --config. Exit status: 0 ok, 1 failure or invalid config,
2 usage error, 3 an import written but partial.
`

// Run runs the command named by args (without the program name) and returns
// the exit code.
func Run(ctx context.Context, args []string, env Env) int {
	if env.LookupEnv == nil {
		env.LookupEnv = os.LookupEnv
	}
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	} else if len(args) == 1 {
		// Flags that stand for a command, as most CLIs accept them.
		switch args[0] {
		case "-h", "-help", "--help":
			cmd, args = "help", nil
		case "-version", "--version":
			cmd, args = "version", nil
		}
	}
	switch cmd {
	case "serve":
		return runServe(ctx, args, env)
	case "check":
		return runCheck(args, env)
	case "simulate":
		return runSimulate(args, env)
	case "import":
		return runImport(args, env)
	case "version":
		if len(args) > 0 {
			fmt.Fprintf(env.Stderr, "sluice version: unexpected argument %q\n%s", args[0], usage)
			return exitUsage
		}
		fmt.Fprintln(env.Stdout, versionLine())
		return exitOK
	case "help":
		return runHelp(ctx, args, env)
	default:
		fmt.Fprintf(env.Stderr, "sluice: unknown command %q\n%s", cmd, usage)
		return exitUsage
	}
}

// runHelp runs `sluice help [COMMAND]`: the command list, or one command's
// own help (what `sluice COMMAND --help` prints), on stdout with exit 0.
func runHelp(ctx context.Context, args []string, env Env) int {
	switch {
	case len(args) == 0, len(args) == 1 && (args[0] == "help" || args[0] == "version"):
		fmt.Fprint(env.Stdout, usage)
		return exitOK
	case len(args) == 1 && (args[0] == "serve" || args[0] == "check" || args[0] == "simulate" || args[0] == "import"),
		len(args) == 2 && args[0] == "import" && args[1] == "scg":
		return Run(ctx, []string{args[0], "--help"}, env)
	case len(args) == 1:
		fmt.Fprintf(env.Stderr, "sluice help: unknown command %q\n%s", args[0], usage)
	default:
		fmt.Fprintf(env.Stderr, "sluice help: unexpected argument %q\n%s", args[len(args)-1], usage)
	}
	return exitUsage
}

// configFlag parses "--config FILE" (also -c); def is the default file. It
// returns the file, or, when the command must not run, its exit code: 0
// after printing help for -h or --help on stdout, exitUsage after a usage
// error on stderr.
func configFlag(name string, args []string, def string, env Env) (string, int, bool) {
	fs := flag.NewFlagSet("sluice "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var file string
	fs.StringVar(&file, "config", def, "")
	fs.StringVar(&file, "c", def, "")
	help := fmt.Sprintf("usage: sluice %s [--config FILE]\n\n  --config FILE, -c FILE   the configuration file (default %s)\n", name, def)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(env.Stdout, help)
			return "", exitOK, false
		}
		fmt.Fprintf(env.Stderr, "sluice %s: %v\n%s", name, err, help)
		return "", exitUsage, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(env.Stderr, "sluice %s: unexpected argument %q\n%s", name, fs.Arg(0), help)
		return "", exitUsage, false
	}
	return file, exitOK, true
}

// versionLine is `sluice <version> <commit> <go version>`.
func versionLine() string {
	b := buildInfo()
	return fmt.Sprintf("sluice %s %s %s", b.Version, b.Commit, b.Go)
}

// buildInfo names this build: the version and commit stamped at link time,
// else those of the module build info when there is any, and the Go
// version.
func buildInfo() gateway.BuildInfo {
	v, c := Version, Commit
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && c == "unknown" {
				c = s.Value
				if len(c) > 12 {
					c = c[:12]
				}
			}
		}
	}
	return gateway.BuildInfo{Version: v, Commit: c, Go: runtime.Version()}
}

// errorLines renders a config load error one problem per line.
func errorLines(err error) string {
	var errs config.Errors
	if errors.As(err, &errs) {
		return errs.Error()
	}
	return err.Error()
}
