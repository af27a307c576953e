// Command polyop is the command-line tool for polyop operators: it starts a
// project in Go, Python or TypeScript (init), adds kinds and webhooks to it
// (create api, create webhook), generates its CRDs, RBAC and webhook
// configurations (generate), runs it on your machine (run), renders a
// sidecar's answers without a cluster (render) and prints its version. Run
// polyop --help for the commands; each lives in package internal/cli.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/polyop/polyop/internal/cli"
)

func main() {
	// SIGINT and SIGTERM cancel the command's context: a command stops what
	// it started (a sidecar process, its socket) and returns.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.NewRootCommand().ExecuteContext(ctx)
	interrupted := ctx.Err() != nil
	stop()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "Error:", err)
	if interrupted || errors.Is(err, context.Canceled) {
		os.Exit(130)
	}
	os.Exit(1)
}
