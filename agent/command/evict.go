package command

import (
	"fmt"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

func newEvictCommand(o *rootOptions) *cobra.Command {
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "evict VM",
		Short: "Ask a VM's instance to leave its node, as a drain would",
		Long: `Ask the running instance of VM to leave its node, as a drain does for every
instance of the node (Kubernetes' pod eviction under KubeVirt):

  None, or LiveMigrateIfPossible and not live-migratable: it is shut down;
    its run strategy decides whether it starts on another node.
  LiveMigrate, LiveMigrateIfPossible: it is marked and live-migrated away;
    the command says so and exits non-zero, like Kubernetes' 429.
  External: it is marked for an outside actor to move; exits non-zero.
  LiveMigrate and not live-migratable: refused, naming why.

--dry-run answers without changing anything.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return o.withClient(ctx, func(c *client.Client) error {
				_, err := c.VMIs.Evict(ctx, &apiv1.EvictVirtualMachineInstanceRequest{
					Key: &apiv1.ObjectKey{Namespace: o.namespace, Name: args[0]}, DryRun: dryRun,
				})
				if err != nil {
					return describeError(err, vmiResource, args[0])
				}
				verb := "evicted: shutting down"
				if dryRun {
					verb = "would be evicted: shut down"
				}
				fmt.Fprintf(cmd.OutOrStdout(), "virtualmachineinstance %s/%s %s\n", o.namespace, args[0], verb)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "decide and answer, change nothing")
	return cmd
}
