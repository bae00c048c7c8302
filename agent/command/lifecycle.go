package command

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// vmAction runs one lifecycle RPC on the VM NAME and reports it.
func (o *rootOptions) vmAction(cmd *cobra.Command, name, action string, call func(context.Context, *client.Client, *apiv1.ObjectKey) error) error {
	ctx := cmd.Context()
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := call(ctx, c, &apiv1.ObjectKey{Namespace: o.namespace, Name: name}); err != nil {
		return describeError(err, vmResource, name)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "virtualmachine %q %s requested\n", name, action)
	return err
}

func newStartCommand(o *rootOptions) *cobra.Command {
	var paused bool
	cmd := &cobra.Command{
		Use:   "start NAME",
		Short: "Start a virtual machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.vmAction(cmd, args[0], "start", func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) error {
				_, err := c.VMs.Start(ctx, &apiv1.StartVirtualMachineRequest{Key: key, Paused: paused})
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&paused, "paused", false, "start with the guest CPUs paused")
	return cmd
}

func newStopCommand(o *rootOptions) *cobra.Command {
	var (
		grace int64
		force bool
	)
	cmd := &cobra.Command{
		Use:   "stop NAME",
		Short: "Stop a virtual machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			gracePeriod, err := stopGracePeriod(grace, force)
			if err != nil {
				return err
			}
			return o.vmAction(cmd, args[0], "stop", func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) error {
				_, err := c.VMs.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: key, GracePeriodSeconds: gracePeriod})
				return err
			})
		},
	}
	cmd.Flags().Int64Var(&grace, "grace-period", -1, "seconds the guest gets to shut down; -1 uses the VM's termination grace period")
	cmd.Flags().BoolVar(&force, "force", false, "stop at once (grace period 0)")
	return cmd
}

// stopGracePeriod maps the stop flags to the optional request field:
// nil leaves the VM's own grace period in force.
func stopGracePeriod(grace int64, force bool) (*int64, error) {
	switch {
	case force && grace > 0:
		return nil, errors.New("--force and a --grace-period greater than 0 cannot be combined")
	case force:
		return proto.Int64(0), nil
	case grace >= 0:
		return proto.Int64(grace), nil
	}
	return nil, nil
}

func newRestartCommand(o *rootOptions) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "restart NAME",
		Short: "Restart a virtual machine",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &apiv1.RestartVirtualMachineRequest{}
			if force {
				req.GracePeriodSeconds = proto.Int64(0)
			}
			return o.vmAction(cmd, args[0], "restart", func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) error {
				req.Key = key
				_, err := c.VMs.Restart(ctx, req)
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "kill the instance instead of shutting it down")
	return cmd
}

func newPauseCommand(o *rootOptions) *cobra.Command {
	return newVMVerbCommand(o, "pause", "Pause the guest CPUs of a running virtual machine",
		func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) error {
			_, err := c.VMs.Pause(ctx, &apiv1.PauseVirtualMachineRequest{Key: key})
			return err
		})
}

func newUnpauseCommand(o *rootOptions) *cobra.Command {
	return newVMVerbCommand(o, "unpause", "Resume the guest CPUs of a paused virtual machine",
		func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) error {
			_, err := c.VMs.Unpause(ctx, &apiv1.UnpauseVirtualMachineRequest{Key: key})
			return err
		})
}

// newVMVerbCommand is a lifecycle command without flags: VERB NAME.
func newVMVerbCommand(o *rootOptions, verb, short string, call func(context.Context, *client.Client, *apiv1.ObjectKey) error) *cobra.Command {
	return &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.vmAction(cmd, args[0], verb, call)
		},
	}
}
