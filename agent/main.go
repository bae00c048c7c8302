// Command virtplane-agent is the virtplane server (serve) and its
// kubectl-like client.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/virtplane/terraform-provider-virtplane/agent/command"
)

func main() {
	// Ctrl-C or SIGTERM cancels the context: get -w and delete --wait end
	// cleanly, and serve can shut down gracefully.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := command.NewRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}
