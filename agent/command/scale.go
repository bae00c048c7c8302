package command

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

func newScaleCommand(root *rootOptions) *cobra.Command {
	var replicas int32
	cmd := &cobra.Command{
		Use:   "scale rs|pool NAME --replicas N",
		Short: "Set how many instances a replica set keeps, or how many VMs a pool keeps",
		Long: `Set spec.replicas of a replica set or pool, and nothing else (kubectl
scale). Its controller then makes or removes instances or VMs; a pool
removes the VMs its scale_in_order names first (the highest ordinals by
default).`,
		Example: `  virtplane-agent scale rs web --replicas 5
  virtplane-agent scale pool db --replicas 0`,
		Args:      cobra.ExactArgs(2),
		ValidArgs: scaleArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runScale(cmd.Context(), root, cmd.OutOrStdout(), args[0], args[1], replicas)
		},
	}
	cmd.Flags().Int32Var(&replicas, "replicas", 0, "the number of replicas to keep (0 to 5000)")
	_ = cmd.MarkFlagRequired("replicas")
	return cmd
}

// scaleArgs are the kinds scale takes.
var scaleArgs = firstNames(func(r *resource) bool { return r.calls.scale != nil })

func runScale(ctx context.Context, root *rootOptions, out io.Writer, kind, name string, replicas int32) error {
	res, err := lookupResource(kind)
	if err != nil {
		return err
	}
	if res.calls.scale == nil {
		return fmt.Errorf("%s cannot be scaled: only replica sets (rs) and pools (pool) can", res.Singular)
	}
	return root.withClient(ctx, func(c *client.Client) error {
		req := &apiv1.ScaleRequest{Key: &apiv1.ObjectKey{Namespace: root.namespace, Name: name}, Replicas: replicas}
		md, err := res.calls.scale(ctx, c, req)
		if err != nil {
			return describeError(err, res, name)
		}
		_, err = fmt.Fprintf(out, "%s %q scaled to %d\n", res.Singular, apiv1.Ref(md.GetNamespace(), md.GetName()), replicas)
		return err
	})
}
