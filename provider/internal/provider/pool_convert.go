package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_virtual_machine_pool model and its conversions to and
// from the API's VirtualMachinePool; its VM template goes through the VM
// resource's (template_convert.go).

// poolModel holds what the pool resource and data source share.
type poolModel struct {
	ID             types.String `tfsdk:"id"`
	Name           types.String `tfsdk:"name"`
	Namespace      types.String `tfsdk:"namespace"`
	UID            types.String `tfsdk:"uid"`
	Replicas       types.Int64  `tfsdk:"replicas"`
	Selector       types.Map    `tfsdk:"selector"`
	Paused         types.Bool   `tfsdk:"paused"`
	MaxUnavailable types.String `tfsdk:"max_unavailable"`
	ScaleInOrder   types.String `tfsdk:"scale_in_order"`
	Template       *vmSpecModel `tfsdk:"virtual_machine_template"`
	Status         types.Object `tfsdk:"status"`
}

// poolResourceModel is the resource's state.
type poolResourceModel struct {
	poolModel
	WaitForReady types.Bool     `tfsdk:"wait_for_ready"`
	Timeouts     timeouts.Value `tfsdk:"timeouts"`
}

// poolStatusAttrTypes is the object type of the pool's status.
var poolStatusAttrTypes = replicaStatusAttrTypes("vm_names", map[string]attr.Type{"updated_replicas": types.Int64Type})

// poolFromModel builds the pool the configuration asks for. All values
// must be known (apply time).
func poolFromModel(ctx context.Context, m *poolModel) (*apiv1.VirtualMachinePool, diag.Diagnostics) {
	var diags diag.Diagnostics
	tmpl := m.Template
	if tmpl == nil {
		tmpl = &vmSpecModel{}
	}
	labels, spec := vmSpecFromModel(ctx, tmpl, &diags)
	replicas := int32(m.Replicas.ValueInt64())
	return &apiv1.VirtualMachinePool{
		Metadata: &apiv1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		Spec: &apiv1.VirtualMachinePoolSpec{
			Replicas:       &replicas,
			Selector:       &apiv1.LabelSelector{MatchLabels: stringMap(ctx, m.Selector, &diags)},
			Paused:         m.Paused.ValueBool(),
			MaxUnavailable: m.MaxUnavailable.ValueString(),
			ScaleInOrder:   m.ScaleInOrder.ValueString(),
			VirtualMachineTemplate: &apiv1.VirtualMachineTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Labels: labels},
				Spec:     spec,
			},
		},
	}, diags
}

// mergePool applies what Terraform manages (want) onto the stored pool
// (cur): the pool's own labels and annotations, its VM template's
// annotations (each VM's) and what mergeVMSpec keeps are left as stored.
func mergePool(cur, want *apiv1.VirtualMachinePool) *apiv1.VirtualMachinePool {
	next := proto.Clone(cur).(*apiv1.VirtualMachinePool)
	if next.Spec == nil {
		next.Spec = &apiv1.VirtualMachinePoolSpec{}
	}
	s, w := next.Spec, want.GetSpec()
	s.Replicas = w.Replicas
	s.Selector = w.GetSelector()
	s.Paused = w.GetPaused()
	s.MaxUnavailable = w.GetMaxUnavailable()
	s.ScaleInOrder = w.GetScaleInOrder()
	if s.VirtualMachineTemplate == nil {
		s.VirtualMachineTemplate = &apiv1.VirtualMachineTemplateSpec{}
	}
	t := s.VirtualMachineTemplate
	if t.Metadata == nil {
		t.Metadata = &apiv1.ObjectMeta{}
	}
	t.Metadata.Labels = w.GetVirtualMachineTemplate().GetMetadata().GetLabels()
	t.Spec = mergeVMSpec(t.Spec, w.GetVirtualMachineTemplate().GetSpec())
	return next
}

// poolToModel maps a pool and its VMs (names of those not being deleted,
// by ordinal) to the model. prior is the state or plan refreshed (nil on
// import and in the data source); full shows every default (data source).
func poolToModel(p *apiv1.VirtualMachinePool, vmNames []string, prior *poolModel, full bool) (poolModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	var pt *vmSpecModel
	if prior != nil {
		pt = prior.Template
	}
	md, spec := p.GetMetadata(), p.GetSpec()
	vt := spec.GetVirtualMachineTemplate()
	tmpl := vmSpecToModel(vt.GetMetadata().GetLabels(), vt.GetSpec(), pt, full, &diags)
	st := p.GetStatus()
	status, d := types.ObjectValue(poolStatusAttrTypes, map[string]attr.Value{
		"replicas":         types.Int64Value(int64(st.GetReplicas())),
		"ready_replicas":   types.Int64Value(int64(st.GetReadyReplicas())),
		"updated_replicas": types.Int64Value(int64(st.GetUpdatedReplicas())),
		"conditions":       conditionList(st.GetConditions(), &diags),
		"vm_names":         stringList(vmNames, &diags),
	})
	diags.Append(d...)
	return poolModel{
		ID:             types.StringValue(namespacedID(md.GetNamespace(), md.GetName())),
		Name:           types.StringValue(md.GetName()),
		Namespace:      types.StringValue(md.GetNamespace()),
		UID:            types.StringValue(md.GetUid()),
		Replicas:       types.Int64Value(int64(spec.DesiredReplicas())),
		Selector:       mapFromAPI(spec.GetSelector().GetMatchLabels(), types.MapNull(types.StringType), true, &diags),
		Paused:         types.BoolValue(spec.GetPaused()),
		MaxUnavailable: types.StringValue(orDefault(spec.GetMaxUnavailable(), apiv1.DefaultMaxUnavailable)),
		ScaleInOrder:   types.StringValue(orDefault(spec.GetScaleInOrder(), apiv1.DefaultScaleInOrder)),
		Template:       &tmpl,
		Status:         status,
	}, diags
}

// poolAttributePath maps an API field path of a pool to the attribute
// that set it; the VM template's fields map as the VM resource's do, under
// virtual_machine_template.
func poolAttributePath(field string) (path.Path, bool) {
	const tmpl = "spec.virtual_machine_template"
	base := path.Root("virtual_machine_template")
	switch {
	case field == tmpl, field == tmpl+".spec", strings.HasPrefix(field, tmpl+".metadata.annotations"):
		return base, true
	case strings.HasPrefix(field, tmpl+"."):
		// The rest is a VM's: metadata.labels, spec.run_strategy, ...
		if p, ok := attributePath(strings.TrimPrefix(field, tmpl+".")); ok {
			return underPath(base, p), true
		}
		return base, true
	}
	return replicaAttributePath(field)
}

// replicaAttributePath maps the fields outside the template that the pool
// and the replica set share.
func replicaAttributePath(field string) (path.Path, bool) {
	norm, args := normalizeFieldPath(field)
	switch {
	case norm == "metadata.name", norm == "metadata.namespace":
		return path.Root(strings.TrimPrefix(norm, "metadata.")), true
	case norm == "spec.replicas", norm == "spec.paused", norm == "spec.max_unavailable", norm == "spec.scale_in_order":
		return path.Root(strings.TrimPrefix(norm, "spec.")), true
	case strings.HasPrefix(norm, "spec.selector"):
		if len(args) > 0 {
			return path.Root("selector").AtMapKey(args[0]), true
		}
		return path.Root("selector"), true
	}
	return path.Empty(), false
}
