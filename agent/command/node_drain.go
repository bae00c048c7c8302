package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// drainPoll is how often drain reads the node's progress.
const drainPoll = time.Second

func newNodeDrainCommand(o *rootOptions) *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "drain NODE",
		Short: "Cordon a node and move every VM instance off it by its eviction strategy",
		Long: `Cordon NODE and move every VM instance off it, each by its eviction
strategy: LiveMigrate and LiveMigrateIfPossible instances migrate to other
nodes; None instances, and LiveMigrateIfPossible ones that cannot migrate,
are shut down and their run strategy decides whether they start elsewhere;
External ones wait for an outside actor; a LiveMigrate instance that cannot
migrate holds the drain up and is named.

drain waits, printing each instance's progress, until nothing has to leave
the node any more. With --timeout it gives up after that long, names what
is still there and exits non-zero; the node stays cordoned and the drain
goes on in the server. "node uncordon" cancels it. See docs/operations.md.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return o.withClient(ctx, func(c *client.Client) error {
				err := drain(ctx, c, args[0], timeout, cmd.OutOrStdout())
				var left *drainTimeout
				if errors.As(err, &left) {
					return err
				}
				return describeError(err, nodeResource, args[0])
			})
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "give up after this long, naming the instances still on the node (0: wait as long as it takes)")
	return cmd
}

// drainTimeout is a drain that did not end in time: what is left, and why.
type drainTimeout struct {
	node    string
	after   time.Duration
	pending []*apiv1.Evacuee
}

func (e *drainTimeout) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "node %q not drained after %s; still on it:", e.node, e.after)
	for _, ev := range e.pending {
		fmt.Fprintf(&b, "\n  %s", ev.Describe())
	}
	b.WriteString("\nthe drain goes on; \"node uncordon " + e.node + "\" cancels it")
	return b.String()
}

// drain asks for the drain and follows the node's status until it is
// drained or ctx ends. Calls refused as Unavailable (a server restarting,
// no quorum) are tried again: the drain itself lives in the server.
func drain(ctx context.Context, c *client.Client, node string, timeout time.Duration, out io.Writer) error {
	if err := retryUnavailable(ctx, func() error {
		_, err := c.Nodes.Drain(ctx, &apiv1.CordonNodeRequest{Name: node})
		return err
	}); err != nil {
		return err
	}
	fmt.Fprintf(out, "node %q cordoned, draining\n", node)
	// What is on the node now, so that an instance that leaves before the
	// first progress record is still reported.
	shown := map[string]string{} // "ns/name" → the line last printed
	if err := retryUnavailable(ctx, func() error {
		// In pages: all instances of a large cluster exceed one message.
		items, _, err := client.ListAll(ctx, &apiv1.ListOptions{}, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListVirtualMachineInstancesResponse, error) {
			return c.VMIs.List(ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: o})
		})
		for _, v := range items {
			if v.GetStatus().GetNodeName() == node && !apiv1.IsFinal(v.GetStatus().GetPhase()) {
				k := apiv1.Ref(v.GetMetadata().GetNamespace(), v.GetMetadata().GetName())
				shown[k] = k + ": on the node"
				fmt.Fprintf(out, "  %s\n", shown[k])
			}
		}
		return err
	}); err != nil {
		return err
	}
	var last []*apiv1.Evacuee
	for {
		var n *apiv1.Node
		err := retryUnavailable(ctx, func() error {
			var err error
			n, err = c.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: node})
			return err
		})
		if errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded {
			return &drainTimeout{node: node, after: timeout, pending: last}
		}
		if err != nil {
			return err
		}
		if !n.GetSpec().GetDrain() {
			return fmt.Errorf("the drain of node %q was canceled (the node was uncordoned)", node)
		}
		ev := n.GetStatus().GetEvacuation()
		if ev != nil {
			last = ev.GetRemaining()
			printProgress(out, shown, last)
			if n.Drained() {
				fmt.Fprintf(out, "node %q drained\n", node)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return &drainTimeout{node: node, after: timeout, pending: last}
		case <-time.After(drainPoll):
		}
	}
}

// printProgress prints what changed since the last read: a new state or
// message, or an instance that left.
func printProgress(out io.Writer, shown map[string]string, now []*apiv1.Evacuee) {
	seen := map[string]bool{}
	for _, e := range now {
		k := apiv1.Ref(e.GetNamespace(), e.GetName())
		seen[k] = true
		if line := e.Describe(); shown[k] != line {
			fmt.Fprintf(out, "  %s\n", line)
			shown[k] = line
		}
	}
	for k := range shown {
		if !seen[k] {
			fmt.Fprintf(out, "  %s: left the node\n", k)
			delete(shown, k)
		}
	}
}

// retryUnavailable calls fn until it returns anything but Unavailable, or
// ctx ends.
func retryUnavailable(ctx context.Context, fn func() error) error {
	for {
		err := fn()
		if status.Code(err) != codes.Unavailable {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(drainPoll):
		}
	}
}
