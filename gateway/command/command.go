// Package command runs the sluice command line in process: the same code as
// the sluice binary (gateway/cmd/sluice), for programs outside the gateway
// module that serve or check a configuration without building the binary,
// such as the bench module's gatewaybench.
package command

import (
	"context"
	"io"

	"github.com/sluice-gw/sluice/gateway/internal/cli"
)

// Run runs the sluice command named by args (without the program name, as
// in `serve --config sluice.yaml`), writing to stdout and stderr, and
// returns its exit status. serve stops on SIGINT or SIGTERM and reloads on
// SIGHUP, as the binary does.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Run(ctx, args, cli.Env{Stdout: stdout, Stderr: stderr})
}
