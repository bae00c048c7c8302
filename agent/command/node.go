package command

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

func newNodeCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Operate on nodes",
	}
	fence := newNodeVerbCommand(o, "fence", "Confirm that a node is down, so its VMs restart elsewhere",
		func(ctx context.Context, c *client.Client, node string, out io.Writer) error {
			resp, err := c.Nodes.Fence(ctx, &apiv1.FenceNodeRequest{Name: node})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "node %q fenced\n", node)
			for _, k := range resp.FailedInstances {
				fmt.Fprintf(out, "virtualmachineinstance %s/%s failed (NodeUnresponsive)\n", k.Namespace, k.Name)
			}
			return nil
		})
	fence.Long = `Confirm that NODE is down (powered off, or cut off for good).

Its virtual machine instances are failed with reason NodeUnresponsive, so
their run strategies start them on other nodes. Only fence a node you know
is not running guests any more: a fenced node that still runs them would
have two copies of a VM writing the same disks. The agent refuses to fence
a node that still heartbeats. The node takes work again after it
re-registers. See docs/failover.md.`
	cordon := newNodeVerbCommand(o, "cordon", "Keep new VM instances off a node; those running there stay",
		func(ctx context.Context, c *client.Client, node string, out io.Writer) error {
			if _, err := c.Nodes.Cordon(ctx, &apiv1.CordonNodeRequest{Name: node}); err != nil {
				return err
			}
			fmt.Fprintf(out, "node %q cordoned\n", node)
			return nil
		})
	uncordon := newNodeVerbCommand(o, "uncordon", "Let new VM instances on a node again",
		func(ctx context.Context, c *client.Client, node string, out io.Writer) error {
			if _, err := c.Nodes.Uncordon(ctx, &apiv1.CordonNodeRequest{Name: node}); err != nil {
				return err
			}
			fmt.Fprintf(out, "node %q uncordoned\n", node)
			return nil
		})
	uncordon.Long = `Let new VM instances on NODE again. On a draining node this also cancels
the drain: instances not yet gone stay, and evacuation migrations that have
not finished are canceled.`
	cmd.AddCommand(fence, cordon, uncordon, newNodeDrainCommand(o), newNodeJoinCommand(), newNodeRevokeCommand(o), newNodeDeleteCommand(o),
		newNodeLabelCommand(o))
	return cmd
}

// newNodeVerbCommand is VERB NODE: one call about a node, which reports to
// out what it did; its error is described as the node's.
func newNodeVerbCommand(o *rootOptions, verb, short string, call func(ctx context.Context, c *client.Client, node string, out io.Writer) error) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NODE",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return o.withClient(ctx, func(c *client.Client) error {
				return describeError(call(ctx, c, args[0], cmd.OutOrStdout()), nodeResource, args[0])
			})
		},
	}
}
