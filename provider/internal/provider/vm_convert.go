package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the virtplane_virtual_machine model and the
// API's VirtualMachine: its identity and status here, what it is made
// from in template_convert.go.

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
		ID:              types.StringValue(apiv1.Ref(md.GetNamespace(), md.GetName())),
		Name:            types.StringValue(md.GetName()),
		Namespace:       types.StringValue(md.GetNamespace()),
		UID:             types.StringValue(md.GetUid()),
		vmSpecModel:     vmSpecToModel(md.GetLabels(), vm.GetSpec(), prior, o.full, &diags),
		RestartRequired: types.BoolValue(apiv1.IsConditionTrue(vm.GetStatus().GetConditions(), apiv1.ConditionRestartRequired)),
	}
	m.Status = statusObject(vm, vmi, &diags)
	return m, diags
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

// interfaceStatusList is status.interfaces: what the node reports of a
// running instance's interfaces; empty without one, so that a stopped
// VM never shows the addresses its last instance had.
func interfaceStatusList(vmi *apiv1.VirtualMachineInstance, diags *diag.Diagnostics) types.List {
	elemType := types.ObjectType{AttrTypes: interfaceStatusAttrTypes}
	elems := []attr.Value{}
	if vmi != nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		for _, s := range vmi.GetStatus().GetInterfaces() {
			elems = append(elems, interfaceStatusObject(s, diags))
		}
	}
	list, d := types.ListValue(elemType, elems)
	diags.Append(d...)
	return list
}

func interfaceStatusObject(s *apiv1.InterfaceStatus, diags *diag.Diagnostics) types.Object {
	ips := make([]attr.Value, 0, len(s.GetIpAddresses()))
	for _, ip := range s.GetIpAddresses() {
		ips = append(ips, types.StringValue(ip))
	}
	ipList, d := types.ListValue(types.StringType, ips)
	diags.Append(d...)
	obj, d := types.ObjectValue(interfaceStatusAttrTypes, map[string]attr.Value{
		"name":           types.StringValue(s.GetName()),
		"mac_address":    optString(s.GetMacAddress()),
		"ip_address":     optString(s.GetIpAddress()),
		"ip_addresses":   ipList,
		"source":         optString(s.GetSource()),
		"info":           optString(s.GetInfo()),
		"interface_name": optString(s.GetInterfaceName()),
	})
	diags.Append(d...)
	return obj
}
