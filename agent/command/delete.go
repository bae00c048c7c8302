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

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

type deleteOptions struct {
	*rootOptions
	wait    bool
	timeout time.Duration
}

func newDeleteCommand(root *rootOptions) *cobra.Command {
	o := &deleteOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "delete vm|image NAME...",
		Short: "Delete virtual machines (their instances go with them) or images",
		Example: `  virtplane-agent delete vm demo
  virtplane-agent delete vm demo --wait --timeout 5m
  virtplane-agent delete image debian-12.qcow2`,
		Args:      cobra.MinimumNArgs(2),
		ValidArgs: []string{"vm", "image"},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args)
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until the objects are gone")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long --wait waits")
	return cmd
}

func (o *deleteOptions) run(ctx context.Context, out io.Writer, args []string) error {
	res, err := lookupResource(args[0])
	if err != nil {
		return err
	}
	switch res {
	case vmiResource:
		return errors.New("VirtualMachineInstances are deleted through their VirtualMachine: stop it (virtplane-agent stop NAME) or delete the VM (virtplane-agent delete vm NAME)")
	case nodeResource:
		return errors.New("nodes are deleted with `virtplane-agent node delete NODE`, which also revokes their certificates")
	case imageResource:
		return o.deleteImages(ctx, out, args[1:])
	}
	names := args[1:]

	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	for _, name := range names {
		key := &apiv1.ObjectKey{Namespace: o.namespace, Name: name}
		if _, err := c.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key}); err != nil {
			return describeError(err, vmResource, name)
		}
		fmt.Fprintf(out, "virtualmachine %q deleted\n", name)
	}
	if !o.wait {
		return nil
	}
	deadline := time.Now().Add(o.timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	for _, name := range names {
		if err := waitGone(ctx, c, o.namespace, name); err != nil {
			// The deadline also travels to the server, whose stream reset
			// may arrive before our own context notices.
			if errors.Is(ctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded || !time.Now().Before(deadline) {
				return fmt.Errorf("timed out after %s waiting for virtualmachine %q to be deleted", o.timeout, name)
			}
			return describeError(err, vmResource, name)
		}
	}
	return nil
}

// errGone ends the watch in waitGone.
var errGone = errors.New("gone")

// waitGone returns once the VM is absent. A watch from revision 0 lists
// the object if it still exists, then SYNCED, so a VM deleted before the
// watch started is not waited for in vain.
func waitGone(ctx context.Context, c *client.Client, namespace, name string) error {
	present, synced := false, false
	opts := &apiv1.WatchOptions{Namespace: namespace, Name: name}
	err := watchObjects(ctx, c, vmResource, opts, func(typ apiv1.EventType, _ object) error {
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
		return fmt.Errorf("the watch ended before virtualmachine %q was deleted", name)
	}
	return err
}
