package command

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// defaultSnapshotWaitTimeout bounds snapshot/restore/clone --wait: the
// server's own failure deadline (5 minutes by default) ends a snapshot
// that hangs well before it.
const defaultSnapshotWaitTimeout = 10 * time.Minute

func newSnapshotCommand(root *rootOptions, clk clock.Clock) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Take, list and delete snapshots of virtual machines",
		Long: `Snapshots of virtual machines (KubeVirt's VirtualMachineSnapshot): the VM's
spec and a copy of each persistent volume, kept on the VM's node. A running
VM is snapshotted online (its file systems frozen when a guest agent
answers); image volumes and cloud-init seeds are not copied. ` + "`restore`" + `
puts a snapshot back, ` + "`clone`" + ` makes a new VM from one. docs/snapshots.md
describes the flow.`,
		Example: `  virtplane-agent snapshot create demo --wait
  virtplane-agent snapshot list demo
  virtplane-agent snapshot get demo-20250102030405 -o yaml
  virtplane-agent snapshot delete demo-20250102030405 --wait`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(
		newSnapshotCreateCommand(root, clk),
		newSnapshotListCommand(root),
		newSnapshotGetCommand(root),
		newSnapshotDeleteCommand(root),
	)
	return cmd
}

type snapshotCreateOptions struct {
	*rootOptions
	name            string
	deletionPolicy  string
	failureDeadline time.Duration
	wait            bool
	timeout         time.Duration
	clock           clock.Clock
	// deadlineSet says --failure-deadline was given; without it the
	// server's default applies.
	deadlineSet func() bool
}

func newSnapshotCreateCommand(root *rootOptions, clk clock.Clock) *cobra.Command {
	o := &snapshotCreateOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "create VM",
		Short: "Take a snapshot of a virtual machine",
		Long: `Take a snapshot of VM, named --name or <VM>-<UTC yyyymmddhhmmss>.

Without --wait the command returns once the snapshot is created; with it,
it prints the snapshot's phases, its indications (Online, GuestAgent,
NoGuestAgent, Paused) and which volumes were copied and left out, and
returns when the snapshot ended: 0 when it succeeded, an error with the
reason when it failed. While a snapshot is under way the VM cannot be
started, stopped or have its volumes changed.`,
		Example: `  virtplane-agent snapshot create demo
  virtplane-agent snapshot create demo --name before-upgrade --deletion-policy Retain --wait
  virtplane-agent snapshot create demo --failure-deadline 15m --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "the snapshot's name (default <VM>-<UTC yyyymmddhhmmss>)")
	f.StringVar(&o.deletionPolicy, "deletion-policy", "", "what deleting the snapshot does with its data: Delete (the default) or Retain")
	f.DurationVar(&o.failureDeadline, "failure-deadline", 0, "how long the snapshot may take before it fails, in whole seconds; 0 never fails (default: the server's, 5m)")
	f.BoolVar(&o.wait, "wait", false, "show the snapshot's progress and wait until it ends")
	f.DurationVar(&o.timeout, "timeout", defaultSnapshotWaitTimeout, "how long --wait waits (the snapshot keeps going after it)")
	o.deadlineSet = func() bool { return f.Changed("failure-deadline") }
	return cmd
}

// spec checks the flags and builds the snapshot's spec.
func (o *snapshotCreateOptions) spec(vm string) (*apiv1.VirtualMachineSnapshotSpec, error) {
	spec := &apiv1.VirtualMachineSnapshotSpec{Source: vm}
	switch o.deletionPolicy {
	case "", apiv1.DeletionPolicyDelete, apiv1.DeletionPolicyRetain:
		spec.DeletionPolicy = o.deletionPolicy
	default:
		return nil, fmt.Errorf("--deletion-policy %q: want %s or %s", o.deletionPolicy, apiv1.DeletionPolicyDelete, apiv1.DeletionPolicyRetain)
	}
	if o.deadlineSet() {
		d := o.failureDeadline
		switch {
		case d < 0:
			return nil, fmt.Errorf("--failure-deadline must not be negative, got %s", d)
		case d%time.Second != 0:
			return nil, fmt.Errorf("--failure-deadline must be whole seconds, got %s", d)
		}
		spec.FailureDeadlineSeconds = proto.Int64(int64(d / time.Second))
	}
	if o.wait {
		if err := checkWaitTimeout(o.timeout); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

func (o *snapshotCreateOptions) run(ctx context.Context, out, errOut io.Writer, vm string) error {
	spec, err := o.spec(vm)
	if err != nil {
		return err
	}
	name := o.name
	if name == "" {
		name = vm + "-" + stamp(o.clock.Now())
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	snap, err := c.Snapshots.Create(ctx, &apiv1.CreateSnapshotRequest{Snapshot: &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: o.namespace, Name: name},
		Spec:     spec,
	}})
	if err != nil {
		return describeError(err, snapshotResource, name)
	}
	if _, err := fmt.Fprintf(out, "snapshot %s of VM %s created\n", name, vm); err != nil || !o.wait {
		return err
	}

	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last, err := snapshotFollower(c, o.clock, name).wait(wctx, snap, newLineView(errOut, snapshotLines).show)
	if err != nil {
		return waitFailure(ctx, wctx, err, o.timeout, snapshotResource, name, snapshotPhase(last), "virtplane-agent get vmsnapshot "+name+" -w")
	}
	return snapshotOutcome(out, last)
}

func snapshotFollower(c *client.Client, clk clock.Clock, name string) follower[*apiv1.VirtualMachineSnapshot, *apiv1.SnapshotEvent] {
	return follower[*apiv1.VirtualMachineSnapshot, *apiv1.SnapshotEvent]{
		what: "snapshot " + name,
		open: func(ctx context.Context, opts *apiv1.WatchOptions) (client.Stream[*apiv1.SnapshotEvent], error) {
			return c.Snapshots.Watch(ctx, &apiv1.WatchSnapshotsRequest{Options: opts})
		},
		done: func(s *apiv1.VirtualMachineSnapshot) bool {
			p := s.GetStatus().GetPhase()
			// A snapshot deleted while it is followed ends the wait too
			// (snapshotOutcome says so).
			return p == apiv1.SnapshotSucceeded || p == apiv1.SnapshotFailed || p == apiv1.SnapshotDeleting ||
				s.GetMetadata().GetDeletionTimestamp() != nil
		},
		phase: snapshotPhase,
		clock: clk,
	}
}

// snapshotPhase is the phase, Pending before the controller set one.
func snapshotPhase(s *apiv1.VirtualMachineSnapshot) string {
	if p := s.GetStatus().GetPhase(); p != "" {
		return p
	}
	return "Pending"
}

// snapshotLines describes a snapshot for --wait: its phase (with what it
// waits for), node, indications, and the volumes copied and left out.
func snapshotLines(s *apiv1.VirtualMachineSnapshot) []followLine {
	st := s.GetStatus()
	phase := snapshotPhase(s)
	if st.GetPhase() == apiv1.SnapshotInProgress || st.GetPhase() == "" {
		phase += conditionNote(st.GetConditions(), "Progressing")
	}
	var details []followLine
	if n := st.GetNodeName(); n != "" {
		details = append(details, followLine{key: "node", text: "  node: " + n})
	}
	if ind := st.GetIndications(); len(ind) > 0 {
		details = append(details, followLine{key: "indications", text: "  indications: " + strings.Join(ind, ", ")})
	}
	if in, ex := st.GetIncludedVolumes(), st.GetExcludedVolumes(); len(in)+len(ex) > 0 {
		details = append(details, followLine{key: "volumes", text: "  volumes: copied " + listOrNone(in) + "; left out " + listOrNone(ex)})
	}
	// The details belong to the phase they were found in: under it while
	// in progress, before the last phase, which ends the log.
	if p := st.GetPhase(); p == apiv1.SnapshotSucceeded || p == apiv1.SnapshotFailed {
		return append(details, followLine{key: "phase", text: phase})
	}
	return append([]followLine{{key: "phase", text: phase}}, details...)
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// snapshotOutcome reports a snapshot that ended: nil when it succeeded,
// else an error with the reason.
func snapshotOutcome(out io.Writer, s *apiv1.VirtualMachineSnapshot) error {
	name, vm := s.GetMetadata().GetName(), s.GetSpec().GetSource()
	st := s.GetStatus()
	switch {
	case st.GetPhase() == apiv1.SnapshotSucceeded:
		line := fmt.Sprintf("snapshot %s of VM %s is ready", name, vm)
		if !st.GetReadyToUse() {
			line = fmt.Sprintf("snapshot %s of VM %s succeeded but is not ready to use", name, vm)
		}
		if n := len(st.GetIncludedVolumes()); n > 0 && st.GetNodeName() != "" {
			line += fmt.Sprintf(" (%d volume%s on %s)", n, plural(n), st.GetNodeName())
		}
		_, err := fmt.Fprintln(out, line)
		return err
	case st.GetPhase() == apiv1.SnapshotFailed:
		reason := st.GetError()
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Errorf("snapshot %s of VM %s failed: %s", name, vm, reason)
	}
	return fmt.Errorf("snapshot %s of VM %s is being deleted (phase %s)", name, vm, snapshotPhase(s))
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

type snapshotListOptions struct {
	*rootOptions
	output        string
	allNamespaces bool
	now           func() time.Time
}

func newSnapshotListCommand(root *rootOptions) *cobra.Command {
	o := &snapshotListOptions{rootOptions: root, now: time.Now}
	cmd := &cobra.Command{
		Use:     "list [VM]",
		Aliases: []string{"ls"},
		Short:   "List snapshots, of one virtual machine or of all",
		Example: `  virtplane-agent snapshot list
  virtplane-agent snapshot list demo -o wide`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			vm := ""
			if len(args) == 1 {
				vm = args[0]
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), vm)
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", formatTable, "output format: table, wide (volumes copied and left out), json or yaml")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list snapshots of all namespaces")
	return cmd
}

func (o *snapshotListOptions) run(ctx context.Context, out, errOut io.Writer, vm string) error {
	wide := o.output == formatWide
	if !wide && checkFormat(o.output) != nil {
		return fmt.Errorf("unsupported output format %q (want table, wide, json or yaml)", o.output)
	}
	namespace := o.namespace
	if o.allNamespaces {
		namespace = ""
	}
	return o.withClient(ctx, func(c *client.Client) error {
		items, err := listObjects(ctx, c, snapshotResource, namespace, "")
		if err != nil {
			return describeError(err, nil, "")
		}
		// The source is in the spec, not a label: filter here.
		if vm != "" {
			items = slices.DeleteFunc(items, func(it object) bool {
				return it.(*apiv1.VirtualMachineSnapshot).GetSpec().GetSource() != vm
			})
		}
		if !wide && o.output != formatTable {
			return printList(out, o.output, items)
		}
		if len(items) == 0 {
			msg := noResources(namespace)
			if vm != "" {
				msg = fmt.Sprintf("No snapshots of VM %s found in %s namespace.", vm, namespace)
			}
			_, err := fmt.Fprintln(errOut, msg)
			return err
		}
		header := tableHeader(snapshotResource, o.allNamespaces)
		if wide {
			header = append(header, wideHeader(snapshotResource)...)
		}
		now := o.now()
		rows := make([][]string, len(items))
		for i, it := range items {
			rows[i] = tableRow(snapshotResource, it, now, o.allNamespaces)
			if wide {
				rows[i] = append(rows[i], wideCells(snapshotResource, it)...)
			}
		}
		return printTable(out, header, rows)
	})
}

func newSnapshotGetCommand(root *rootOptions) *cobra.Command {
	o := &getOptions{rootOptions: root, now: time.Now}
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Display one snapshot (get vmsnapshot NAME)",
		Example: `  virtplane-agent snapshot get demo-20250102030405
  virtplane-agent snapshot get demo-20250102030405 -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), []string{"vmsnapshot", args[0]})
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", formatTable, "output format: table, wide, json or yaml")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "after showing it, print changes as they happen")
	return cmd
}

func newSnapshotDeleteCommand(root *rootOptions) *cobra.Command {
	o := &deleteOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete snapshots (delete vmsnapshot NAME)",
		Long: `Delete snapshots. A snapshot whose deletion_policy is Delete (the default)
takes its content and the data on the node with it; Retain keeps them
(get vmsnapshotcontent lists them, delete vmsnapshotcontent removes one).`,
		Example: `  virtplane-agent snapshot delete demo-20250102030405 --wait`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), append([]string{"vmsnapshot"}, args...))
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until the snapshots (and their data) are gone")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long --wait waits")
	return cmd
}
