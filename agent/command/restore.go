package command

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// readinessPolicies are the values of --policy, the default first.
var readinessPolicies = []string{
	apiv1.ReadinessWaitGracePeriod, apiv1.ReadinessStopTarget, apiv1.ReadinessFailImmediate, apiv1.ReadinessWaitEventually,
}

type restoreOptions struct {
	*rootOptions
	snapshot string
	name     string
	policy   string
	wait     bool
	timeout  time.Duration
	clock    clock.Clock
}

func newRestoreCommand(root *rootOptions, clk clock.Clock) *cobra.Command {
	o := &restoreOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "restore VM --snapshot SNAPSHOT",
		Short: "Restore a virtual machine from a snapshot",
		Long: `Restore VM from a snapshot (KubeVirt's VirtualMachineRestore, named --name
or <VM>-restore-<UTC yyyymmddhhmmss>): the VM gets the snapshot's spec and
its persistent volumes get the snapshot's data. A VM that does not exist is
made, halted, on the snapshot's node.

The VM must be stopped; --policy says what happens when it runs:
WaitGracePeriod (the default: wait up to 5 minutes for it to stop, then
fail), StopTarget (stop it), FailImmediate or WaitEventually. A restore
either completes or leaves the VM as it was; the VM cannot start until it
has ended.

With --wait the command prints the restore's phases (Pending, Staging,
Committing) and returns when it ended: 0 when it succeeded, an error with
the reason when it failed.`,
		Example: `  virtplane-agent restore demo --snapshot demo-20250102030405 --wait
  virtplane-agent restore demo --snapshot before-upgrade --policy StopTarget --wait
  virtplane-agent restore demo-copy --snapshot before-upgrade`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.snapshot, "snapshot", "", "the snapshot to restore (required)")
	f.StringVar(&o.name, "name", "", "the restore's name (default <VM>-restore-<UTC yyyymmddhhmmss>)")
	f.StringVar(&o.policy, "policy", "", "what to do when the VM runs: "+strings.Join(readinessPolicies, ", ")+" (default "+apiv1.ReadinessWaitGracePeriod+")")
	f.BoolVar(&o.wait, "wait", false, "show the restore's progress and wait until it ends")
	f.DurationVar(&o.timeout, "timeout", defaultSnapshotWaitTimeout, "how long --wait waits (the restore keeps going after it)")
	_ = cmd.MarkFlagRequired("snapshot")
	return cmd
}

func (o *restoreOptions) run(ctx context.Context, out, errOut io.Writer, vm string) error {
	if o.policy != "" && !slices.Contains(readinessPolicies, o.policy) {
		return fmt.Errorf("--policy %q: want one of %s", o.policy, strings.Join(readinessPolicies, ", "))
	}
	if o.snapshot == "" {
		return fmt.Errorf("--snapshot must not be empty")
	}
	if o.wait {
		if err := checkWaitTimeout(o.timeout); err != nil {
			return err
		}
	}
	name := o.name
	if name == "" {
		name = vm + "-restore-" + stamp(o.clock.Now())
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.Restores.Create(ctx, &apiv1.CreateRestoreRequest{Restore: &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: o.namespace, Name: name},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: vm, Snapshot: o.snapshot, TargetReadinessPolicy: o.policy},
	}})
	if err != nil {
		return describeError(err, restoreResource, name)
	}
	if _, err := fmt.Fprintf(out, "restore %s of VM %s from snapshot %s created\n", name, vm, o.snapshot); err != nil || !o.wait {
		return err
	}

	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last, err := restoreFollower(c, o.clock, name).wait(wctx, r, newLineView(errOut, restoreLines).show)
	if err != nil {
		return waitFailure(ctx, wctx, err, o.timeout, restoreResource, name, restorePhase(last), "virtplane-agent get vmrestore "+name+" -w")
	}
	return restoreOutcome(out, last)
}

func restoreFollower(c *client.Client, clk clock.Clock, name string) follower[*apiv1.VirtualMachineRestore, *apiv1.RestoreEvent] {
	return follower[*apiv1.VirtualMachineRestore, *apiv1.RestoreEvent]{
		what: "restore " + name,
		open: func(ctx context.Context, opts *apiv1.WatchOptions) (client.Stream[*apiv1.RestoreEvent], error) {
			return c.Restores.Watch(ctx, &apiv1.WatchRestoresRequest{Options: opts})
		},
		done:  restoreEnded,
		phase: restorePhase,
		clock: clk,
	}
}

// restoreEnded says whether a restore succeeded or failed.
func restoreEnded(r *apiv1.VirtualMachineRestore) bool {
	st := r.GetStatus()
	return st.GetComplete() || st.GetPhase() == apiv1.RestoreSucceeded || st.GetPhase() == apiv1.RestoreFailed
}

// restorePhase is the phase, Pending before the controller set one.
func restorePhase(r *apiv1.VirtualMachineRestore) string {
	if p := r.GetStatus().GetPhase(); p != "" {
		return p
	}
	return apiv1.RestorePending
}

// restoreLines describes a restore for --wait: its phase with what it
// does or waits for, the node that copies, and whether the target is new.
func restoreLines(r *apiv1.VirtualMachineRestore) []followLine {
	st := r.GetStatus()
	phase := restorePhase(r)
	if m := st.GetMessage(); m != "" && !restoreEnded(r) {
		phase += " (" + m + ")"
	}
	lines := []followLine{{key: "phase", text: phase}}
	if n := st.GetNodeName(); n != "" {
		lines = append(lines, followLine{key: "node", text: "  node: " + n})
	}
	if st.GetTargetCreated() {
		lines = append(lines, followLine{key: "created", text: "  VM " + r.GetSpec().GetTarget() + " is new, made from the snapshot"})
	}
	return lines
}

// restoreOutcome reports a restore that ended: nil when it succeeded,
// else an error with the reason.
func restoreOutcome(out io.Writer, r *apiv1.VirtualMachineRestore) error {
	name, vm, snap := r.GetMetadata().GetName(), r.GetSpec().GetTarget(), r.GetSpec().GetSnapshot()
	st := r.GetStatus()
	if st.GetPhase() == apiv1.RestoreFailed {
		reason := st.GetError()
		if reason == "" {
			reason = "no reason given"
		}
		// A restore fails only before its commit point (docs/snapshots.md).
		return fmt.Errorf("restore %s of VM %s from snapshot %s failed: %s; the VM is as it was", name, vm, snap, reason)
	}
	line := fmt.Sprintf("VM %s restored from snapshot %s", vm, snap)
	if n := len(st.GetRestores()); n > 0 {
		line += fmt.Sprintf(", %d volume%s", n, plural(n))
	}
	_, err := fmt.Fprintf(out, "%s (restore %s)\n", line, name)
	return err
}
