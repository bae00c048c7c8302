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

type deleteOptions struct {
	*rootOptions
	wait    bool
	timeout time.Duration
	// deleteSnapshots also deletes a VM's snapshots (and their data),
	// which otherwise outlive it.
	deleteSnapshots bool
}

func newDeleteCommand(root *rootOptions) *cobra.Command {
	o := &deleteOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "delete " + strings.Join(deleteArgs, "|") + " NAME...",
		Short: "Delete virtual machines (their instances go with them), replica sets, pools, images, storage classes, snapshots, restores or clones, or cancel migrations",
		Long: `Delete virtual machines (their instances go with them), replica sets, pools
or images. A replica set's instances and a pool's VMs are deleted by their
controller, which holds the replica set or pool until they are gone.
A storage class is refused while a VM or an instance has a volume on it.

A VM's snapshots outlive it unless --delete-snapshots is given. Deleting a
snapshot deletes its content and the data on the node too, unless its
deletion_policy is Retain. A restore or clone that has not ended is
undone as far as it can be (docs/snapshots.md).

Deleting a migration cancels it if it has not ended (a running transfer
is aborted and the guest stays on its source node); the migration is
gone once the controller has recorded how it ended. ` + "`migrate cancel VM`" + `
cancels a VM's migrations without their names.`,
		Example: `  virtplane-agent delete vm demo
  virtplane-agent delete vm demo --wait --timeout 5m
  virtplane-agent delete vm demo --delete-snapshots
  virtplane-agent delete vmsnapshot demo-20250102030405 --wait
  virtplane-agent delete pool db --wait
  virtplane-agent delete image debian-12.qcow2
  virtplane-agent delete storageclass ceph
  virtplane-agent delete migration demo-migration-x7k2p --wait`,
		Args:      cobra.MinimumNArgs(2),
		ValidArgs: deleteArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args)
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until the objects are gone")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long --wait waits")
	cmd.Flags().BoolVar(&o.deleteSnapshots, "delete-snapshots", false, "vm only: also delete the VM's snapshots and their data (they outlive it otherwise)")
	return cmd
}

func (o *deleteOptions) run(ctx context.Context, out io.Writer, args []string) error {
	res, err := lookupResource(args[0])
	if err != nil {
		return err
	}
	if o.deleteSnapshots && res.calls.deleteWithSnapshots == nil {
		return fmt.Errorf("--delete-snapshots applies to vm only, not %s", res.Singular)
	}
	switch {
	case res.deleteRefusal != "":
		return errors.New(res.deleteRefusal)
	case res.deleteBy != nil:
		return res.deleteBy.delete(ctx, o, out, args[1:])
	}
	names := args[1:]

	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	for _, name := range names {
		key := &apiv1.ObjectKey{Namespace: o.namespace, Name: name}
		obj, err := deleteObject(ctx, c, res, key, o.deleteSnapshots)
		if err != nil {
			return describeError(err, res, name)
		}
		switch {
		case res.calls.deleted != nil:
			fmt.Fprintln(out, res.calls.deleted(name, obj))
		case o.deleteSnapshots:
			fmt.Fprintf(out, "%s %q deleted with its snapshots\n", res.Singular, name)
		default:
			fmt.Fprintf(out, "%s %q deleted\n", res.Singular, name)
		}
	}
	if !o.wait {
		return nil
	}
	deadline := time.Now().Add(o.timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for _, name := range names {
		if err := waitGone(ctx, c, res, o.namespace, name); err != nil {
			// The deadline also travels to the server, whose stream reset
			// may arrive before our own context notices.
			if errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded || !time.Now().Before(deadline) {
				return fmt.Errorf("timed out after %s waiting for %s %q to be deleted", o.timeout, res.Singular, name)
			}
			return describeError(err, res, name)
		}
	}
	return nil
}

// deleteArgs are the kinds delete takes, for completion and help.
var deleteArgs = firstNames(func(r *resource) bool { return r.deleteRefusal == "" })

// errGone ends the watch in waitGone.
var errGone = errors.New("gone")

// waitGone returns once the object (of res) is absent. A watch from
// revision 0 lists the object if it still exists, then SYNCED, so one
// deleted before the watch started is not waited for in vain.
func waitGone(ctx context.Context, c *client.Client, res *resource, namespace, name string) error {
	present, synced := false, false
	opts := &apiv1.WatchOptions{Namespace: namespace, Name: name}
	err := watchObjects(ctx, c, res, opts, func(typ apiv1.EventType, _ object) error {
		switch typ {
		case apiv1.EventType_RESET:
			present, synced = false, false
		case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED:
			present = true
		case apiv1.EventType_DELETED:
			present = false
			if synced {
				return errGone
			}
		case apiv1.EventType_SYNCED:
			synced = true
			if !present {
				return errGone
			}
		}
		return nil
	})
	switch {
	case errors.Is(err, errGone):
		return nil
	case err == nil:
		return fmt.Errorf("the watch ended before %s %q was deleted", res.Singular, name)
	}
	return err
}
