package command

import "github.com/spf13/cobra"

// newServeCommand is replaced by the real server command.
func newServeCommand() *cobra.Command {
	return &cobra.Command{Use: "serve", Short: "Run the agent"}
}
