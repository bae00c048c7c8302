package command

import (
	"fmt"

	"github.com/spf13/cobra"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// addvolume and removevolume: KubeVirt's virtctl addvolume/removevolume
// (docs/hotplug.md). Each is one API call; the VM controller carries the
// change to the running instance and its node plugs or unplugs the disk,
// which the instance's status.volume_status then shows.

func newAddVolumeCommand(o *rootOptions) *cobra.Command {
	var name, size, class, bus, image, serial string
	cmd := &cobra.Command{
		Use:   "addvolume VM --volume-name NAME --size SIZE",
		Short: "Add a hotpluggable persistent volume to a VM, plugged into its running guest",
		Long: `Add a disk and its persistent volume to VM, hotpluggable: the VM's template
gets them, and its running instance has the disk plugged in by its node
without a restart (KubeVirt's virtctl addvolume). A stopped VM gets it when
it starts. The volume is made on the storage class (the node's own disk by
default) like any persistent volume, from --image or blank.

In the guest the disk's serial is --serial, else the volume name
(/dev/disk/by-id/virtio-NAME for a virtio disk). The instance's
status.volume_status says when it is Ready, and its target.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return o.withClient(ctx, func(c *client.Client) error {
				req := &apiv1.AddVolumeRequest{
					Key:    &apiv1.ObjectKey{Namespace: o.namespace, Name: args[0]},
					Disk:   &apiv1.Disk{Name: name, Serial: serial},
					Volume: &apiv1.PersistentVolume{Size: size, Image: image, StorageClass: class},
				}
				if bus != "" {
					req.Disk.Disk = &apiv1.DiskTarget{Bus: bus}
				}
				if _, err := c.VMs.AddVolume(ctx, req); err != nil {
					return describeError(err, vmResource, args[0])
				}
				fmt.Fprintf(cmd.OutOrStdout(), "virtualmachine %s/%s: volume %s added; a running instance has it plugged in\n",
					o.namespace, args[0], name)
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&name, "volume-name", "", "name of the disk and its volume (a DNS label; required)")
	f.StringVar(&size, "size", "", "size of the volume, a quantity such as 1Gi (required)")
	f.StringVar(&class, "storage-class", "", "storage class of the volume; empty is the node's own disk (local)")
	f.StringVar(&bus, "bus", "", "disk bus: virtio (the default) or scsi")
	f.StringVar(&image, "image", "", "image the volume is made from (a file of the node image directory); blank when empty")
	f.StringVar(&serial, "serial", "", "the disk's serial in the guest; the volume name when empty")
	_ = cmd.MarkFlagRequired("volume-name")
	_ = cmd.MarkFlagRequired("size")
	return cmd
}

func newRemoveVolumeCommand(o *rootOptions) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "removevolume VM --volume-name NAME",
		Short: "Remove a hotpluggable volume from a VM, unplugged from its running guest",
		Long: `Remove a hotpluggable disk and its volume from VM: the VM's template loses
them, and its running instance has the disk unplugged by its node without a
restart (KubeVirt's virtctl removevolume). The guest is asked to release the
disk; one that does not keeps it until it does or the VM restarts, and the
instance's status.volume_status shows it Detaching meanwhile.

The volume's data is kept until the VM is deleted, as KubeVirt keeps the
volume's PVC: adding a volume of the same name again brings it back.
A disk that is not hotpluggable is refused: remove it with an update of the
VM, which applies when the VM restarts.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return o.withClient(ctx, func(c *client.Client) error {
				_, err := c.VMs.RemoveVolume(ctx, &apiv1.RemoveVolumeRequest{
					Key: &apiv1.ObjectKey{Namespace: o.namespace, Name: args[0]}, Name: name,
				})
				if err != nil {
					return describeError(err, vmResource, args[0])
				}
				fmt.Fprintf(cmd.OutOrStdout(), "virtualmachine %s/%s: volume %s removed; a running instance has it unplugged (its data is kept until the VM is deleted)\n",
					o.namespace, args[0], name)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&name, "volume-name", "", "name of the disk and its volume (required)")
	_ = cmd.MarkFlagRequired("volume-name")
	return cmd
}
