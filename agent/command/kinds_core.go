package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The kinds of service.proto: VMs, their instances, nodes, images and
// migrations.

var vmResource = kind[*apiv1.VirtualMachine, *apiv1.VirtualMachineEvent]{
	resource: resource{
		Kind: apiv1.KindVirtualMachine, Singular: "virtualmachine", Namespaced: true,
		names:       []string{"vm", "vms", "virtualmachine", "virtualmachines"},
		columns:     []string{"NAME", "AGE", "STATUS", "READY"},
		wideColumns: []string{"STORAGE"},
	},
	row: func(vm *apiv1.VirtualMachine, now time.Time) []string {
		return []string{
			vm.GetMetadata().GetName(),
			age(vm.GetMetadata().GetCreationTimestamp(), now),
			cell(vm.GetStatus().GetPrintableStatus()),
			boolString(vm.GetStatus().GetReady()),
		}
	},
	// Each persistent volume and the storage class it is on, which says
	// whether the VM is pinned to a node (local) or not.
	wide: func(vm *apiv1.VirtualMachine) []string {
		var vols []string
		for _, v := range vm.GetSpec().GetTemplate().GetSpec().GetVolumes() {
			if pv := v.GetPersistent(); pv != nil {
				vols = append(vols, v.GetName()+"="+validation.StorageClassOf(pv))
			}
		}
		return []string{cell(strings.Join(vols, ","))}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachine, error) {
		return c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListVirtualMachinesResponse, error) {
		return c.VMs.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.VirtualMachineEvent], error) {
		return c.VMs.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		return c.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	},
	update: func(ctx context.Context, c *client.Client, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		return c.VMs.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: vm})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachine, error) {
		return c.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key})
	},
	// A VM's snapshots (and their data) outlive it unless asked.
	deleteWithSnapshots: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachine, error) {
		return c.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key, DeleteSnapshots: true})
	},
}.define()

var vmiResource = kind[*apiv1.VirtualMachineInstance, *apiv1.VirtualMachineInstanceEvent]{
	resource: resource{
		Kind: "VirtualMachineInstance", Singular: "virtualmachineinstance", Namespaced: true,
		names:       []string{"vmi", "vmis", "virtualmachineinstance", "virtualmachineinstances"},
		columns:     []string{"NAME", "AGE", "PHASE", "IP", "NODENAME", "READY"},
		wideColumns: []string{"IPS"},
		deleteRefusal: "VirtualMachineInstances are deleted through their VirtualMachine: stop it (virtplane-agent stop NAME) " +
			"or delete the VM (virtplane-agent delete vm NAME)",
	},
	row: func(vmi *apiv1.VirtualMachineInstance, now time.Time) []string {
		ready := "False"
		if c := findCondition(vmi.GetStatus().GetConditions(), "Ready"); c != nil && c.GetStatus() != "" {
			ready = c.GetStatus()
		}
		return []string{
			vmi.GetMetadata().GetName(),
			age(vmi.GetMetadata().GetCreationTimestamp(), now),
			cell(vmi.GetStatus().GetPhase()),
			cell(vmiIP(vmi)),
			cell(vmi.GetStatus().GetNodeName()),
			ready,
		}
	},
	// An instance's address on each interface.
	wide: func(vmi *apiv1.VirtualMachineInstance) []string {
		var ips []string
		for _, iface := range vmi.GetStatus().GetInterfaces() {
			if ip := ifaceIP(iface); ip != "" {
				ips = append(ips, ip)
			}
		}
		return []string{cell(strings.Join(ips, ","))}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineInstance, error) {
		return c.VMIs.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListVirtualMachineInstancesResponse, error) {
		return c.VMIs.List(ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.VirtualMachineInstanceEvent], error) {
		return c.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: o})
	},
}.define()

// vmiIP is the first address of the first interface that has one.
func vmiIP(vmi *apiv1.VirtualMachineInstance) string {
	for _, iface := range vmi.GetStatus().GetInterfaces() {
		if ip := ifaceIP(iface); ip != "" {
			return ip
		}
	}
	return ""
}

// ifaceIP is an interface's first address, "" while it has none.
func ifaceIP(iface *apiv1.InterfaceStatus) string {
	if ip := iface.GetIpAddress(); ip != "" {
		return ip
	}
	if ips := iface.GetIpAddresses(); len(ips) > 0 {
		return ips[0]
	}
	return ""
}

// Nodes are cluster-scoped, and their List neither pages nor filters by
// namespace.
var nodeResource = kind[*apiv1.Node, *apiv1.NodeEvent]{
	resource: resource{
		Kind: "Node", Singular: "node",
		names:         []string{"node", "nodes"},
		columns:       []string{"NAME", "STATUS", "AGE", "CPU", "MEMORY", "KVM", "IMAGES", "VERSION"},
		wideColumns:   []string{"BRIDGES", "NETWORKS"},
		deleteRefusal: "nodes are deleted with `virtplane-agent node delete NODE`, which also revokes their certificates",
	},
	row: func(n *apiv1.Node, now time.Time) []string {
		kvm := "tcg"
		if n.GetStatus().GetNodeInfo().GetKvmUsable() {
			kvm = "kvm"
		}
		alloc := n.GetStatus().GetAllocatable()
		return []string{
			n.GetMetadata().GetName(),
			nodeStatus(n),
			age(n.GetMetadata().GetCreationTimestamp(), now),
			cell(alloc["cpu"]),
			cell(alloc["memory"]),
			kvm,
			// A count, like kubectl's RESTARTS; -o yaml lists them.
			strconv.Itoa(len(n.GetStatus().GetImages())),
			cell(n.GetStatus().GetNodeInfo().GetAgentVersion()),
		}
	},
	// A node's bridges and libvirt networks: what placement matches
	// instances' networks against.
	wide: func(n *apiv1.Node) []string {
		return []string{cell(strings.Join(n.GetStatus().GetBridges(), ",")), cell(strings.Join(n.GetStatus().GetNetworks(), ","))}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.Node, error) {
		return c.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: key.GetName()})
	},
	list: func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) ([]*apiv1.Node, error) {
		resp, err := c.Nodes.List(ctx, &apiv1.ListNodesRequest{LabelSelector: o.GetLabelSelector()})
		return resp.GetItems(), err
	},
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.NodeEvent], error) {
		return c.Nodes.Watch(ctx, &apiv1.WatchNodesRequest{Options: o})
	},
}.define()

// nodeStatus follows kubectl: Ready/NotReady from the Ready condition
// (Unknown without one), plus SchedulingDisabled, plus Draining or
// Drained while a drain is on.
func nodeStatus(n *apiv1.Node) string {
	s := "Unknown"
	if c := findCondition(n.GetStatus().GetConditions(), "Ready"); c != nil {
		s = "NotReady"
		if c.GetStatus() == "True" {
			s = "Ready"
		}
	}
	if !n.GetStatus().GetSchedulable() || n.GetSpec().GetUnschedulable() {
		s += ",SchedulingDisabled"
	}
	if n.GetSpec().GetDrain() {
		if n.Drained() {
			s += ",Drained"
		} else {
			s += ",Draining"
		}
	}
	return s
}

// Images (pulled by nodes from a URL) have commands of their own
// (image_api.go) that get and delete hand over to: their table counts
// the nodes that have each.
var imageResource = &resource{
	Kind: "Image", Singular: "image",
	names: []string{"image", "images"},
	getBy: imageCommands{}, deleteBy: imageCommands{},
}

// imageCommands are get and delete of images: image get and image delete.
type imageCommands struct{}

func (imageCommands) get(ctx context.Context, o *getOptions, out, errOut io.Writer, name string, wide bool) error {
	if wide {
		return errors.New("images have no wide output; -o yaml shows every node's entry")
	}
	if o.showLabels {
		return errors.New("images have no LABELS column; -o yaml shows their labels")
	}
	return o.runImages(ctx, out, errOut, name)
}

func (imageCommands) delete(ctx context.Context, o *deleteOptions, out io.Writer, names []string) error {
	return o.deleteImages(ctx, out, names)
}

// Migrations are created by `migrate` and deleted (canceled) by
// `migrate cancel` or `delete migration`.
var migrationResource = kind[*apiv1.VirtualMachineInstanceMigration, *apiv1.MigrationEvent]{
	resource: resource{
		Kind: "VirtualMachineInstanceMigration", Singular: "migration", Namespaced: true,
		names: []string{"migration", "migrations", "vmim", "vmims",
			"virtualmachineinstancemigration", "virtualmachineinstancemigrations"},
		columns: []string{"NAME", "VMI", "PHASE", "SOURCE", "TARGET", "PROGRESS", "AGE"},
	},
	row: migrationRow,
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineInstanceMigration, error) {
		return c.Migrations.Get(ctx, &apiv1.GetMigrationRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListMigrationsResponse, error) {
		return c.Migrations.List(ctx, &apiv1.ListMigrationsRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.MigrationEvent], error) {
		return c.Migrations.Watch(ctx, &apiv1.WatchMigrationsRequest{Options: o})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineInstanceMigration, error) {
		return c.Migrations.Delete(ctx, &apiv1.DeleteMigrationRequest{Key: key})
	},
	// Deleting a migration that has not ended cancels it.
	deleted: func(name string, m *apiv1.VirtualMachineInstanceMigration) string {
		if apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
			return fmt.Sprintf("migration %q deleted (it had ended: %s)", name, m.GetStatus().GetPhase())
		}
		return fmt.Sprintf("migration %q canceled (phase %s)", name, phaseOrPending(m))
	},
}.define()

// migrationRow is a migration's line of get migrations.
func migrationRow(m *apiv1.VirtualMachineInstanceMigration, now time.Time) []string {
	st := m.GetStatus()
	target := st.GetTargetNode()
	if target == "" {
		target = st.GetMigrationState().GetTargetNode()
	}
	return []string{
		m.GetMetadata().GetName(),
		cell(m.GetSpec().GetVmiName()),
		phaseOrPending(m),
		cell(st.GetMigrationState().GetSourceNode()),
		cell(target),
		cell(percentDone(st.GetMigrationState().GetProgress())),
		age(m.GetMetadata().GetCreationTimestamp(), now),
	}
}
