package command

import (
	"fmt"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func newNodeCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Operate on nodes",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "fence NODE",
		Short: "Confirm that a node is down, so its VMs restart elsewhere",
		Long: `Confirm that NODE is down (powered off, or cut off for good).

Its virtual machine instances are failed with reason NodeUnresponsive, so
their run strategies start them on other nodes. Only fence a node you know
is not running guests any more: a fenced node that still runs them would
have two copies of a VM writing the same disks. The agent refuses to fence
a node that still heartbeats. The node takes work again after it
re-registers. See docs/failover.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := o.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.Nodes.Fence(ctx, &apiv1.FenceNodeRequest{Name: args[0]})
			if err != nil {
				return describeError(err, nodeResource, args[0])
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "node %q fenced\n", args[0])
			for _, k := range resp.FailedInstances {
				fmt.Fprintf(out, "virtualmachineinstance %s/%s failed (NodeUnresponsive)\n", k.Namespace, k.Name)
			}
			return nil
		},
	})
	cmd.AddCommand(newNodeJoinCommand(), newNodeRevokeCommand(o), newNodeDeleteCommand(o))
	return cmd
}
