package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// defaultMigrateWaitTimeout bounds migrate --wait: a migration that
// converges at all does so well within it on a healthy cluster, and its
// own completion and progress timeouts end one that does not.
const defaultMigrateWaitTimeout = 10 * time.Minute

type migrateOptions struct {
	*rootOptions
	to       string
	selector map[string]string
	wait     bool
	timeout  time.Duration
	// isTTY and clock are replaced by tests.
	isTTY func(io.Writer) bool
	clock clock.Clock
}

func newMigrateCommand(root *rootOptions) *cobra.Command {
	o := &migrateOptions{rootOptions: root, isTTY: isTerminal, clock: clock.RealClock{}}
	cmd := &cobra.Command{
		Use:   "migrate VM",
		Short: "Live-migrate a running virtual machine to another node",
		Long: `Live-migrate the running instance of VM to another node, as KubeVirt's
virtctl migrate: a VirtualMachineInstanceMigration named <VM>-migration-xxxxx
is created, and the migration controller picks a target node the instance
fits on (never its current node), honouring the VM's node selector
narrowed by --to and --selector.

Without --wait the command returns once the migration is scheduled;
` + "`virtplane-agent get migrations -w`" + ` follows it. With --wait it shows the
migration's phases and progress and returns when it ends: 0 when it
succeeded, an error with the failure reason when it failed. A --timeout
stops only the waiting: the migration keeps running.

A VM that is not running, is paused, boots from EFI or already has a
migration in progress is refused with the reason. ` + "`migrate cancel VM`" + `
cancels a migration (to migrate a VM named "cancel": migrate -- cancel).`,
		Example: `  virtplane-agent migrate demo
  virtplane-agent migrate demo --to node-b --wait
  virtplane-agent migrate demo --selector rack=r2,zone=a --wait --timeout 5m
  virtplane-agent migrate cancel demo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.to, "to", "", "node to migrate to (adds "+apiv1.LabelNodeName+"=NODE to the target's node selector)")
	f.StringToStringVar(&o.selector, "selector", nil, "node labels the target must have, k=v,k2=v2 (added to the VM's node selector)")
	f.BoolVar(&o.wait, "wait", false, "show the migration's progress and wait until it ends")
	f.DurationVar(&o.timeout, "timeout", defaultMigrateWaitTimeout, "how long --wait waits (the migration keeps running after it)")
	cmd.AddCommand(newMigrateCancelCommand(root))
	return cmd
}

// addedNodeSelector merges --selector and --to, refusing a --selector
// that names another node than --to.
func (o *migrateOptions) addedNodeSelector() (map[string]string, error) {
	sel := map[string]string{}
	for k, v := range o.selector {
		sel[k] = v
	}
	if o.to != "" {
		if v, ok := sel[apiv1.LabelNodeName]; ok && v != o.to {
			return nil, fmt.Errorf("--to %s and --selector %s=%s name different nodes", o.to, apiv1.LabelNodeName, v)
		}
		sel[apiv1.LabelNodeName] = o.to
	}
	if len(sel) == 0 {
		return nil, nil
	}
	return sel, nil
}

func (o *migrateOptions) run(ctx context.Context, out, errOut io.Writer, vm string) error {
	if err := checkWaitTimeout(o.timeout); err != nil {
		return err
	}
	sel, err := o.addedNodeSelector()
	if err != nil {
		return err
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	mig, err := c.VMs.Migrate(ctx, &apiv1.MigrateVirtualMachineRequest{
		Key: &apiv1.ObjectKey{Namespace: o.namespace, Name: vm}, AddedNodeSelector: sel,
	})
	if err != nil {
		return describeError(err, vmResource, vm)
	}
	name := mig.GetMetadata().GetName()
	if _, err := fmt.Fprintf(out, "VM %s was scheduled to migrate (migration %s)\n", vm, name); err != nil || !o.wait {
		return err
	}

	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	view := newMigrationView(errOut, o.isTTY(errOut), o.clock.Now)
	last, err := migrationFollower(c, o.clock, name).wait(wctx, mig, view.show)
	view.finish()
	switch {
	case err == nil:
		return migrationOutcome(out, vm, last)
	case interrupted(ctx, err):
		return nil
	// The deadline also travels to the server, whose stream reset may
	// arrive before our own context notices.
	case wctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded:
		return fmt.Errorf("timed out after %s waiting for migration %s (phase %s); it keeps running: `virtplane-agent get migration %s -w` follows it, `virtplane-agent migrate cancel %s` cancels it",
			o.timeout, name, phaseOrPending(last), name, vm)
	}
	return describeError(err, migrationResource, name)
}

// migrationOutcome reports a migration that ended: nil when it
// succeeded, else an error with the reason it failed.
func migrationOutcome(out io.Writer, vm string, m *apiv1.VirtualMachineInstanceMigration) error {
	name := m.GetMetadata().GetName()
	ms := m.GetStatus().GetMigrationState()
	if m.GetStatus().GetPhase() == apiv1.MigrationSucceeded {
		target := ms.GetTargetNode()
		if target == "" {
			target = m.GetStatus().GetTargetNode()
		}
		line := fmt.Sprintf("VM %s migrated", vm)
		if src := ms.GetSourceNode(); src != "" {
			line += " from " + src
		}
		if target != "" {
			line += " to " + target
		}
		if p := ms.GetProgress(); p.GetElapsedMs() > 0 || p.GetDowntimeMs() > 0 {
			line += fmt.Sprintf(" in %s (downtime %d ms)", (time.Duration(p.GetElapsedMs()) * time.Millisecond).Round(100*time.Millisecond), p.GetDowntimeMs())
		}
		_, err := fmt.Fprintf(out, "%s (migration %s)\n", line, name)
		return err
	}
	msg := fmt.Sprintf("migration %s failed: %s", name, failureReason(m))
	// A failed pre-copy migration leaves the guest where it was; a
	// post-copy one that failed after the switch may have lost it.
	if src := ms.GetSourceNode(); src != "" && ms.GetMode() != apiv1.MigrationModePostCopy {
		msg += fmt.Sprintf("; VM %s stays on %s", vm, src)
	}
	return errors.New(msg)
}

// failureReason is why a migration failed: the source's reason when it
// ran, else the controller's (it never started, or was canceled).
func failureReason(m *apiv1.VirtualMachineInstanceMigration) string {
	st := m.GetStatus()
	ms := st.GetMigrationState()
	reason := ms.GetFailureReason()
	if reason == "" {
		reason = joinNonEmpty(": ", st.GetReason(), st.GetMessage())
	}
	if reason == "" {
		reason = "no reason given"
	}
	if a := ms.GetAbortStatus(); a != "" {
		reason += " (abort " + a + ")"
	}
	return reason
}

func joinNonEmpty(sep string, parts ...string) string {
	s := ""
	for _, p := range parts {
		if p == "" {
			continue
		}
		if s != "" {
			s += sep
		}
		s += p
	}
	return s
}

func phaseOrPending(m *apiv1.VirtualMachineInstanceMigration) string {
	if p := m.GetStatus().GetPhase(); p != "" {
		return p
	}
	return apiv1.MigrationPending
}

func newMigrateCancelCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "cancel VM",
		Short: "Cancel the migrations of a virtual machine that have not ended",
		Long: `Cancel every migration of VM that has not ended (KubeVirt's virtctl
migrate-cancel): each is deleted, which aborts a running transfer. The
guest stays on its source node; the migration ends Failed and stays
listed until the controller has cleaned up.`,
		Example: `  virtplane-agent migrate cancel demo
  virtplane-agent get migrations -l ` + apiv1.LabelMigrationVMIName + `=demo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return o.withClient(ctx, func(c *client.Client) error {
				return cancelMigrations(ctx, c, cmd.OutOrStdout(), o.namespace, args[0])
			})
		},
	}
}

// cancelMigrations deletes every migration of vm that has not ended.
func cancelMigrations(ctx context.Context, c *client.Client, out io.Writer, namespace, vm string) error {
	resp, err := c.Migrations.List(ctx, &apiv1.ListMigrationsRequest{Options: &apiv1.ListOptions{
		Namespace: namespace, LabelSelector: apiv1.LabelMigrationVMIName + "=" + vm,
	}})
	if err != nil {
		return describeError(err, nil, "")
	}
	found := 0
	for _, m := range resp.GetItems() {
		if apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
			continue
		}
		name := m.GetMetadata().GetName()
		if m.GetMetadata().GetDeletionTimestamp() != nil {
			found++
			fmt.Fprintf(out, "migration %s is already being canceled (phase %s)\n", name, phaseOrPending(m))
			continue
		}
		got, err := c.Migrations.Delete(ctx, &apiv1.DeleteMigrationRequest{Key: &apiv1.ObjectKey{Namespace: namespace, Name: name}})
		if status.Code(err) == codes.NotFound {
			continue // it ended and went away in between
		}
		if err != nil {
			return describeError(err, migrationResource, name)
		}
		found++
		fmt.Fprintf(out, "migration %s of VM %s canceled (phase %s)\n", name, vm, phaseOrPending(got))
	}
	if found == 0 {
		//lint:ignore ST1005 KubeVirt's wording, printed as a sentence
		return fmt.Errorf("Found no migration to cancel for %s", vm)
	}
	return nil
}
