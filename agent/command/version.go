package command

import (
	"fmt"

	"github.com/spf13/cobra"
)

// Version is set at build time:
//
//	go build -ldflags "-X github.com/virtplane/terraform-provider-virtplane/agent/command.Version=v0.1.0" ./agent
var Version = "dev"

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of virtplane-agent",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), Version)
			return err
		},
	}
}
