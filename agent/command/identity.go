package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// addIdentityFlags are serve's flags for node identities.
func addIdentityFlags(f *pflag.FlagSet, o *server.Options, node *server.NodeOptions) {
	f.StringVar(&node.JoinToken, "join-token", "", "role node: bootstrap token to join with on the first start (see `node join`)")
	f.StringVar(&node.JoinCAHash, "ca-cert-hash", "", "role node: sha256:<hex> pin of the server's CA for --join-token (printed by `token create`)")
	f.DurationVar(&o.NodeCertValidity, "node-cert-validity", pki.DefaultNodeCertValidity, "server: validity of the node certificates it signs; nodes renew at two thirds of it")
}

func newTokenCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Bootstrap tokens that let hosts join as nodes"}
	var (
		ttl         time.Duration
		nodeName    string
		description string
	)
	create := &cobra.Command{
		Use:   "create",
		Short: "Make a single-use bootstrap token for one node to join",
		Long: `Make a bootstrap token: one node may join with it, once, before it expires.

The output is the command to run on the new host. The token is shown only
now; the server keeps a hash of it. --node-name restricts the token to one
name and lets it replace that node's credential (a reinstalled host); a
token without it may only join a name that has no credential.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := o.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := c.Bootstrap.CreateToken(ctx, &apiv1.CreateBootstrapTokenRequest{
				TtlSeconds: int64(ttl.Seconds()), NodeName: nodeName, Description: description,
			})
			if err != nil {
				return describeError(err, nil, "")
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "token: %s (expires %s)\n", resp.Token, resp.Expires.AsTime().Local().Format(time.RFC3339))
			fmt.Fprintf(out, "ca-cert-hash: %s\n", resp.CaCertHash)
			name := nodeName
			if name == "" {
				name = "<node-name>"
			}
			fmt.Fprintf(out, "\njoin with:\n  virtplane-agent node join --server https://<server>:<port> --node-name %s --token %s --ca-cert-hash %s\n",
				name, resp.Token, resp.CaCertHash)
			return nil
		},
	}
	f := create.Flags()
	f.DurationVar(&ttl, "ttl", time.Hour, "how long the token may be used (1m to 24h)")
	f.StringVar(&nodeName, "node-name", "", "the only node name the token may join as")
	f.StringVar(&description, "description", "", "a note kept with the token")
	cmd.AddCommand(create)
	return cmd
}

func newNodeJoinCommand() *cobra.Command {
	var jo server.JoinOptions
	cmd := &cobra.Command{
		Use:   "join",
		Short: "Join this host as a node: get a client certificate with a bootstrap token",
		Long: `Join this host as a node.

The key is made here and never leaves this host: the server signs a
certificate request for --node-name, authorized by the bootstrap token,
which is consumed. The server is trusted by --ca-cert-hash (printed by
'token create') or --server-ca-file. The certificate is stored in
<data-dir>/identity and renewed by the agent before it expires. Then start
the agent with: serve --role node --server <same server>.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if jo.NodeName == "" {
				h, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("--node-name: %w", err)
				}
				jo.NodeName = h
			}
			id, err := server.Join(cmd.Context(), jo)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "joined as node %q; identity in %s\nstart the node agent with: virtplane-agent serve --role node --server %s --data-dir %s --node-name %s\n",
				jo.NodeName, id.Dir, jo.Server, jo.DataDir, jo.NodeName)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&jo.Server, "server", "", "the server's TLS endpoint, https://host:port")
	f.StringVar(&jo.Token, "token", "", "bootstrap token from `token create`")
	f.StringVar(&jo.CAHash, "ca-cert-hash", "", "sha256:<hex> pin of the server's CA (from `token create`)")
	f.StringVar(&jo.CAFile, "server-ca-file", "", "PEM CA to verify the server with, instead of --ca-cert-hash")
	f.StringVar(&jo.NodeName, "node-name", "", "this host's node name (default: host name)")
	f.StringVar(&jo.DataDir, "data-dir", "/var/lib/virtplane", "the agent's data dir (the identity goes to <data-dir>/identity)")
	_ = cmd.MarkFlagRequired("server")
	_ = cmd.MarkFlagRequired("token")
	return cmd
}

func newNodeRevokeCommand(o *rootOptions) *cobra.Command {
	return newNodeVerbCommand(o, "revoke", "Revoke a node's certificates: its calls and streams are cut off at once",
		func(ctx context.Context, c *client.Client, node string, out io.Writer) error {
			resp, err := c.Nodes.Revoke(ctx, &apiv1.RevokeNodeRequest{Name: node})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "node %q revoked (certificates %v); it must join again with a new token\n", node, resp.RevokedSerials)
			return nil
		})
}

func newNodeDeleteCommand(o *rootOptions) *cobra.Command {
	cmd := newNodeVerbCommand(o, "delete", "Revoke a node and delete its Node object",
		func(ctx context.Context, c *client.Client, node string, out io.Writer) error {
			if _, err := c.Nodes.Delete(ctx, &apiv1.DeleteNodeRequest{Name: node}); err != nil {
				return err
			}
			fmt.Fprintf(out, "node %q deleted\n", node)
			return nil
		})
	cmd.Long = `Revoke NODE's certificates and delete its Node object. Instances still on
the node are failed, so their run strategies restart them elsewhere; the
delete is refused while the node runs an instance whose eviction strategy
forbids shutting it down (LiveMigrate, External): drain the node first, or
fence it if it is down.`
	return cmd
}
