// Command sluice is a rate-limiting API gateway. See `sluice help`.
package main

import (
	"context"
	"os"

	"github.com/sluice-gw/sluice/gateway/internal/cli"
)

func main() {
	os.Exit(cli.Run(context.Background(), os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr}))
}
