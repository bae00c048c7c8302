package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The model of what VMs and instances are made from: the settings the
// virtplane_virtual_machine resource has at its root, a pool in its
// virtual_machine_template and a replica set in its template.

// instanceSpecModel is an instance's spec as the schema has it: what the
// virtplane_virtual_machine resource, a pool's virtual_machine_template and
// a replica set's template share (template_schema.go has its attributes
// and blocks, template_convert.go its conversions).
type instanceSpecModel struct {
	CPU                    *cpuModel        `tfsdk:"cpu"`
	Memory                 quantityValue    `tfsdk:"memory"`
	Disks                  []diskModel      `tfsdk:"disk"`
	Boot                   *bootModel       `tfsdk:"boot"`
	Bootloader             *bootloaderModel `tfsdk:"bootloader"`
	Interfaces             []interfaceModel `tfsdk:"interface"`
	NodeSelector           types.Map        `tfsdk:"node_selector"`
	EvictionStrategy       types.String     `tfsdk:"eviction_strategy"`
	TerminationGracePeriod types.Int64      `tfsdk:"termination_grace_period"`
}

// vmSpecModel is what a VM is made from: the VM resource's settings, and
// a pool's template of its VMs. Labels are the VM's, annotations its
// instances'.
type vmSpecModel struct {
	Labels            types.Map    `tfsdk:"labels"`
	Annotations       types.Map    `tfsdk:"annotations"`
	RunStrategy       types.String `tfsdk:"run_strategy"`
	NodeFailurePolicy types.String `tfsdk:"node_failure_policy"`
	instanceSpecModel
}

// instanceTemplateModel is what a replica set's instances are made from:
// their labels, annotations and spec.
type instanceTemplateModel struct {
	Labels      types.Map `tfsdk:"labels"`
	Annotations types.Map `tfsdk:"annotations"`
	instanceSpecModel
}

type cpuModel struct {
	Cores   types.Int64 `tfsdk:"cores"`
	Sockets types.Int64 `tfsdk:"sockets"`
	Threads types.Int64 `tfsdk:"threads"`
}

type diskModel struct {
	Name       types.String     `tfsdk:"name"`
	Bus        types.String     `tfsdk:"bus"`
	BootOrder  types.Int64      `tfsdk:"boot_order"`
	Image      types.String     `tfsdk:"image"`
	Persistent *persistentModel `tfsdk:"persistent"`
	CloudInit  *cloudInitModel  `tfsdk:"cloud_init"`
}

type persistentModel struct {
	Size         quantityValue `tfsdk:"size"`
	Image        types.String  `tfsdk:"image"`
	StorageClass types.String  `tfsdk:"storage_class"`
	Hotpluggable types.Bool    `tfsdk:"hotpluggable"`
}

type cloudInitModel struct {
	UserData    types.String `tfsdk:"user_data"`
	NetworkData types.String `tfsdk:"network_data"`
}

type bootModel struct {
	Kernel  types.String `tfsdk:"kernel"`
	Initrd  types.String `tfsdk:"initrd"`
	Cmdline types.String `tfsdk:"cmdline"`
}

// bootloaderModel is the API's firmware.bootloader: at most one of bios
// and efi (an empty block is bios).
type bootloaderModel struct {
	BIOS *biosModel `tfsdk:"bios"`
	EFI  *efiModel  `tfsdk:"efi"`
}

type biosModel struct{}

type efiModel struct {
	SecureBoot types.Bool `tfsdk:"secure_boot"`
}

// interfaceModel is an interface and the network of the same name: the
// kind is bridge, network, or neither (user-mode NAT, with its port
// forwards).
type interfaceModel struct {
	Name         types.String         `tfsdk:"name"`
	Model        types.String         `tfsdk:"model"`
	MACAddress   types.String         `tfsdk:"mac_address"`
	Bridge       *bridgeModel         `tfsdk:"bridge"`
	Network      *libvirtNetworkModel `tfsdk:"network"`
	PortForwards []portForwardModel   `tfsdk:"port_forward"`
}

type bridgeModel struct {
	Name types.String `tfsdk:"name"`
	VLAN types.Int64  `tfsdk:"vlan"`
}

type libvirtNetworkModel struct {
	Name types.String `tfsdk:"name"`
}

type portForwardModel struct {
	HostPort    types.Int64  `tfsdk:"host_port"`
	GuestPort   types.Int64  `tfsdk:"guest_port"`
	Protocol    types.String `tfsdk:"protocol"`
	HostAddress types.String `tfsdk:"host_address"`
}

// A resource that leaves run_strategy out runs (the API itself
// needs one of run_strategy or running).
const defaultRunStrategy = apiv1.RunStrategyAlways
