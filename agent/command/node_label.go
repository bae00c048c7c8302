package command

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

func newNodeLabelCommand(o *rootOptions) *cobra.Command {
	var overwrite bool
	cmd := &cobra.Command{
		Use:   "label NODE KEY=VALUE ... KEY- ...",
		Short: "Set or remove an admin's labels on a node, which VMs' node selectors match",
		Long: `Set labels on NODE (KEY=VALUE) or remove them (KEY-), as kubectl label does.
A label that NODE has with another value changes only with --overwrite.

These are the admins' labels: a node's agent can neither set nor change nor
remove them, so a node selector on one (tier=secure) reaches only the nodes
an admin labelled. Labels under ` + apiv1.NodeLabelPrefix + ` are the node's own
(its agent sets them: ` + apiv1.LabelKVM + `, and serve --node-labels),
and ` + apiv1.LabelNodeName + ` is the server's: neither can be set here.
"get nodes --show-labels" lists them all. See docs/operations.md.`,
		Example: `  virtplane-agent node label node1 tier=secure
  virtplane-agent node label node1 tier=public --overwrite
  virtplane-agent node label node1 tier-`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := parseNodeLabels(args[0], args[1:])
			if err != nil {
				return err
			}
			req.Overwrite = overwrite
			ctx := cmd.Context()
			return o.withClient(ctx, func(c *client.Client) error {
				if _, err := c.Nodes.Label(ctx, req); err != nil {
					return describeError(err, nodeResource, args[0])
				}
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "node %q labelled\n", args[0])
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&overwrite, "overwrite", false, "change labels the node has with another value")
	return cmd
}

// parseNodeLabels reads kubectl label's arguments: KEY=VALUE sets, KEY-
// removes. Syntax beyond that is the server's to check, which names the
// field.
func parseNodeLabels(node string, specs []string) (*apiv1.LabelNodeRequest, error) {
	req := &apiv1.LabelNodeRequest{Name: node, Set: map[string]string{}}
	for _, s := range specs {
		if k, v, ok := strings.Cut(s, "="); ok {
			if _, dup := req.Set[k]; dup {
				return nil, fmt.Errorf("label %q given twice", k)
			}
			req.Set[k] = v
			continue
		}
		k, ok := strings.CutSuffix(s, "-")
		if !ok || k == "" {
			return nil, fmt.Errorf("%q is neither KEY=VALUE (set a label) nor KEY- (remove one)", s)
		}
		req.Remove = append(req.Remove, k)
	}
	for _, k := range req.Remove {
		if _, ok := req.Set[k]; ok {
			return nil, fmt.Errorf("label %q is both set and removed", k)
		}
	}
	return req, nil
}
