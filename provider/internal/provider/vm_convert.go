package provider

import (
	"context"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the Terraform model and the API object. The
// schema is flatter than the API: a disk block is a disk plus the volume of
// the same name, an interface block is an interface plus its network
// (vm_convert_network.go), annotations go to the instance template.

// vmFromModel builds the VM the configuration asks for (see
// instanceSpecFromModel). All values must be known (apply time).
func vmFromModel(ctx context.Context, m *vmModel) (*apiv1.VirtualMachine, diag.Diagnostics) {
	var diags diag.Diagnostics
	labels, spec := vmSpecFromModel(ctx, &m.vmSpecModel, &diags)
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{
			Namespace: m.Namespace.ValueString(),
			Name:      m.Name.ValueString(),
			Labels:    labels,
		},
		Spec: spec,
	}
	return vm, diags
}

// mergeVM applies what Terraform manages (want) onto the stored VM (cur)
// and returns the object to write. What the schema does not model is kept
// as stored, so that an apply never clobbers settings made with other tools:
// VM annotations, template labels, disk serials and read-only flags
// (mergeVMSpec).
func mergeVM(cur, want *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	next := proto.Clone(cur).(*apiv1.VirtualMachine)
	if next.Metadata == nil {
		next.Metadata = &apiv1.ObjectMeta{}
	}
	next.Metadata.Labels = want.GetMetadata().GetLabels()
	next.Spec = mergeVMSpec(next.Spec, want.GetSpec())
	return next
}

// readOptions tune vmToModel.
type readOptions struct {
	// prior is the state or plan being refreshed; nil on import and in the
	// data source. It decides between null and empty and whether default
	// blocks are shown.
	prior *vmModel
	// full shows every block and map, defaults included (data source).
	full bool
}

// vmToModel maps a VM and its instance (nil when there is none) to the
// model (see instanceSpecToModel).
func vmToModel(_ context.Context, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, o readOptions) (vmModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	var prior *vmSpecModel
	if o.prior != nil {
		prior = &o.prior.vmSpecModel
	}
	md := vm.GetMetadata()
	m := vmModel{
		ID:              types.StringValue(namespacedID(md.GetNamespace(), md.GetName())),
		Name:            types.StringValue(md.GetName()),
		Namespace:       types.StringValue(md.GetNamespace()),
		UID:             types.StringValue(md.GetUid()),
		vmSpecModel:     vmSpecToModel(md.GetLabels(), vm.GetSpec(), prior, o.full, &diags),
		RestartRequired: types.BoolValue(apiv1.IsConditionTrue(vm.GetStatus().GetConditions(), apiv1.ConditionRestartRequired)),
	}
	m.Status = statusObject(vm, vmi, &diags)
	return m, diags
}

// runStrategyOf is the VM's effective run strategy; a VM that sets both
// fields (which the API refuses) shows its run_strategy.
func runStrategyOf(spec *apiv1.VirtualMachineSpec) string {
	if s, err := spec.EffectiveRunStrategy(); err == nil {
		return s
	}
	return spec.GetRunStrategy()
}

// statusObject is the computed status attribute.
func statusObject(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, diags *diag.Diagnostics) types.Object {
	st := vm.GetStatus()
	list := conditionList(st.GetConditions(), diags)
	obj, d := types.ObjectValue(statusAttrTypes, map[string]attr.Value{
		"printable_status": optString(st.GetPrintableStatus()),
		"phase":            optString(vmi.GetStatus().GetPhase()),
		"ready":            types.BoolValue(st.GetReady()),
		"node":             optString(vmi.GetStatus().GetNodeName()),
		"conditions":       list,
		"interfaces":       interfaceStatusList(vmi, diags),
	})
	diags.Append(d...)
	return obj
}

// attributePath maps an API field path from a validation error
// ("spec.template.spec.domain.devices.disks[1].name") to the attribute
// that set it (disk[1].name). ok is false for fields the schema does not
// expose; such errors are reported against the whole resource.
func attributePath(field string) (path.Path, bool) {
	norm, args := normalizeFieldPath(field)
	// listElem is the list element the first [i] of norm names.
	listElem := func(root string) (path.Path, bool) {
		if len(args) == 0 {
			return path.Root(root), true
		}
		i, err := strconv.Atoi(args[0])
		if err != nil {
			return path.Root(root), true
		}
		return path.Root(root).AtListIndex(i), true
	}
	// mapKey is the map attribute root, at the key of the first [k].
	mapKey := func(root string) (path.Path, bool) {
		if len(args) == 0 {
			return path.Root(root), true
		}
		return path.Root(root).AtMapKey(args[0]), true
	}
	const (
		tmplSpec = "spec.template.spec."
		domain   = tmplSpec + "domain."
		disks    = domain + "devices.disks[*]"
		ifaces   = domain + "devices.interfaces[*]"
		volumes  = tmplSpec + "volumes[*]"
		networks = tmplSpec + "networks[*]"
	)
	switch {
	case norm == "metadata.name", norm == "metadata.namespace":
		return path.Root(strings.TrimPrefix(norm, "metadata.")), true
	case strings.HasPrefix(norm, "metadata.labels"):
		return mapKey("labels")
	case norm == "spec.run_strategy", norm == "spec.running":
		return path.Root("run_strategy"), true
	case norm == "spec.node_failure_policy":
		return path.Root("node_failure_policy"), true
	case strings.HasPrefix(norm, "spec.template.metadata.annotations"):
		return mapKey("annotations")
	case strings.HasPrefix(norm, tmplSpec+"node_selector"):
		return mapKey("node_selector")
	case norm == tmplSpec+"termination_grace_period_seconds":
		return path.Root("termination_grace_period"), true
	case norm == tmplSpec+"eviction_strategy":
		return path.Root("eviction_strategy"), true
	case strings.HasPrefix(norm, domain+"cpu"):
		if n := strings.TrimPrefix(norm, domain+"cpu."); n == "cores" || n == "sockets" || n == "threads" {
			return path.Root("cpu").AtName(n), true
		}
		return path.Root("cpu"), true
	case strings.HasPrefix(norm, domain+"memory"):
		return path.Root("memory"), true
	case strings.HasPrefix(norm, domain+"firmware.bootloader"):
		switch strings.TrimPrefix(norm, domain+"firmware.bootloader") {
		case ".bios":
			return path.Root("bootloader").AtName("bios"), true
		case ".efi":
			return path.Root("bootloader").AtName("efi"), true
		case ".efi.secure_boot":
			return path.Root("bootloader").AtName("efi").AtName("secure_boot"), true
		}
		return path.Root("bootloader"), true
	case strings.HasPrefix(norm, domain+"firmware"):
		if n := strings.TrimPrefix(norm, domain+"firmware.kernel_boot."); n == "kernel" || n == "initrd" || n == "cmdline" {
			return path.Root("boot").AtName(n), true
		}
		return path.Root("boot"), true
	case strings.HasPrefix(norm, disks):
		p, _ := listElem("disk")
		switch strings.TrimPrefix(norm, disks) {
		case ".name":
			return p.AtName("name"), true
		case ".boot_order":
			return p.AtName("boot_order"), true
		case ".disk", ".disk.bus", ".cdrom", ".cdrom.bus":
			return p.AtName("bus"), true
		}
		return p, true
	case strings.HasPrefix(norm, ifaces):
		p, _ := listElem("interface")
		switch n := strings.TrimPrefix(norm, ifaces+"."); n {
		case "name", "model", "mac_address":
			return p.AtName(n), true
		}
		return p, true
	case strings.HasPrefix(norm, volumes):
		// Volumes are written in disk order, one per disk.
		p, _ := listElem("disk")
		switch n := strings.TrimPrefix(norm, volumes+"."); n {
		case "name":
			return p.AtName("name"), true
		case "image", "image.name":
			return p.AtName("image"), true
		case "persistent.size", "persistent.image":
			return p.AtName("persistent").AtName(strings.TrimPrefix(n, "persistent.")), true
		case "cloud_init_no_cloud.user_data", "cloud_init_no_cloud.network_data":
			return p.AtName("cloud_init").AtName(strings.TrimPrefix(n, "cloud_init_no_cloud.")), true
		case "persistent":
			return p.AtName("persistent"), true
		case "cloud_init_no_cloud":
			return p.AtName("cloud_init"), true
		}
		return p, true
	case norm == tmplSpec+"networks", norm == domain+"devices.interfaces":
		return path.Root("interface"), true // their number
	case strings.HasPrefix(norm, networks):
		return networkAttributePath(strings.TrimPrefix(norm, networks), args), true
	}
	return path.Empty(), false
}
