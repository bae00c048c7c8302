package command

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
)

// newMemberCommand manages the members of a cluster of embedded etcds,
// through the local member's socket in --data-dir (like snapshot save).
// External clusters have their own tools (etcdctl member ...).
func newMemberCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "member",
		Short: "List, add and remove the members of the servers' embedded etcd cluster",
		Long: `List, add and remove the members of a cluster of embedded etcds (servers
started with --etcd-peer-listen). Run it on a server host, as the agent's
user: it talks to the local member through <data-dir>/etcd/etcd.sock.

Replacing a dead server: remove its member, then add the new one.`,
	}
	cmd.PersistentFlags().StringVar(&dataDir, "data-dir", defaultDataDir, "the local server's state directory")
	withClient := func(cmd *cobra.Command, fn func(context.Context, *clientv3.Client) error) error {
		sock, err := embeddedSocket(dataDir)
		if err != nil {
			return err
		}
		if err := probeSocket(sock); err != nil {
			return fmt.Errorf("no embedded etcd answers at %s (is a server running with --data-dir %s?): %w", sock, dataDir, err)
		}
		cli, err := etcdserver.Connect(cmd.Context(), []string{"unix://" + sock}, nil)
		if err != nil {
			return err
		}
		defer cli.Close()
		return fn(cmd.Context(), cli)
	}

	list := &cobra.Command{
		Use:   "list",
		Short: "List the members",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withClient(cmd, func(ctx context.Context, cli *clientv3.Client) error {
				members, err := etcdserver.ListMembers(ctx, cli)
				if err != nil {
					return err
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 3, ' ', 0)
				fmt.Fprintln(tw, "NAME\tID\tROLE\tPEER URLS")
				for _, m := range members {
					name, role := m.Name, "voter"
					if name == "" {
						name = "(not started)"
					}
					if m.Learner {
						role = "learner"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, m.IDString(), role, strings.Join(m.PeerURLs, ","))
				}
				return tw.Flush()
			})
		},
	}

	var peerURLs []string
	add := &cobra.Command{
		Use:   "add NAME --peer-url https://HOST:PORT",
		Short: "Add a member; prints the flags its server starts with",
		Long: `Add a member called NAME whose server will listen for peers at --peer-url.

It joins as a learner, which does not count toward quorum, and its server
promotes it once it has caught up: adding a member never costs the cluster
its majority, even while the new server is not started yet. Add one member
at a time.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			return withClient(cmd, func(ctx context.Context, cli *clientv3.Client) error {
				initial, err := etcdserver.AddMember(ctx, cli, name, peerURLs)
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), `member %s added, as a learner until its server starts and catches up.
On the new server host:
  1. Copy %s/pki from this host to the new server's data dir (the CAs
     every server shares and the API token; keep it 0700, it holds keys).
  2. Start the server with:
       virtplane-agent serve --role server --etcd-name %s --etcd-peer-listen %s \
         --etcd-initial-cluster %s \
         --etcd-initial-cluster-state existing
`, name, dataDir, name, strings.Join(peerURLs, ","), initial)
				return nil
			})
		},
	}
	add.Flags().StringSliceVar(&peerURLs, "peer-url", nil, "the new member's peer URL, its server's --etcd-peer-listen (https://host:port)")
	_ = add.MarkFlagRequired("peer-url")

	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a member (by name or hex ID), e.g. a dead server's",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withClient(cmd, func(ctx context.Context, cli *clientv3.Client) error {
				m, err := etcdserver.RemoveMember(ctx, cli, args[0])
				if err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "member %s (%s) removed; wipe <data-dir>/etcd on its host before that server runs again\n", m.Name, m.IDString())
				return nil
			})
		},
	}
	cmd.AddCommand(list, add, remove)
	return cmd
}
