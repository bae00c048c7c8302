package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Values of the provider-only update_policy attribute.
const (
	updatePolicyRestart = "restart"
	updatePolicyNone    = "none"
)

// Provider-side defaults; the API's own are apiv1's Default* constants.
const (
	// A resource that leaves run_strategy out runs (the API itself
	// needs one of run_strategy or running).
	defaultRunStrategy  = apiv1.RunStrategyAlways
	defaultUpdatePolicy = updatePolicyRestart
)

// Allowed values, in the order the documentation lists them.
var (
	updatePolicies = []string{updatePolicyRestart, updatePolicyNone}
)

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

// vmModel holds what the virtplane_virtual_machine resource and data source
// share; the resource adds its provider-only settings.
type vmModel struct {
	ID        types.String `tfsdk:"id"`
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
	UID       types.String `tfsdk:"uid"`
	vmSpecModel
	RestartRequired types.Bool   `tfsdk:"restart_required"`
	Status          types.Object `tfsdk:"status"`
}

// vmResourceModel is the resource's state.
type vmResourceModel struct {
	vmModel
	SourceSnapshot types.String    `tfsdk:"source_snapshot"`
	UpdatePolicy   types.String    `tfsdk:"update_policy"`
	WaitForIP      *waitForIPModel `tfsdk:"wait_for_ip"`
	Timeouts       timeouts.Value  `tfsdk:"timeouts"`
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
	Size  quantityValue `tfsdk:"size"`
	Image types.String  `tfsdk:"image"`
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

// waitForIPModel is the provider-only wait_for_ip block.
type waitForIPModel struct {
	Timeout   types.String `tfsdk:"timeout"`
	Interface types.String `tfsdk:"interface"`
}

// Object types of the computed status attribute.
var (
	interfaceStatusAttrTypes = map[string]attr.Type{
		"name":           types.StringType,
		"mac_address":    types.StringType,
		"ip_address":     types.StringType,
		"ip_addresses":   types.ListType{ElemType: types.StringType},
		"source":         types.StringType,
		"info":           types.StringType,
		"interface_name": types.StringType,
	}
	statusAttrTypes = map[string]attr.Type{
		"printable_status": types.StringType,
		"phase":            types.StringType,
		"ready":            types.BoolType,
		"node":             types.StringType,
		"conditions":       types.ListType{ElemType: types.ObjectType{AttrTypes: conditionAttrTypes}},
		"interfaces":       types.ListType{ElemType: types.ObjectType{AttrTypes: interfaceStatusAttrTypes}},
	}
)
