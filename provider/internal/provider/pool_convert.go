package provider

import (
	"cmp"
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the virtplane_virtual_machine_pool model and
// the API's VirtualMachinePool; its VM template goes through the VM
// resource's (template_convert.go).

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
		ID:             types.StringValue(apiv1.Ref(md.GetNamespace(), md.GetName())),
		Name:           types.StringValue(md.GetName()),
		Namespace:      types.StringValue(md.GetNamespace()),
		UID:            types.StringValue(md.GetUid()),
		Replicas:       types.Int64Value(int64(spec.DesiredReplicas())),
		Selector:       mapFromAPI(spec.GetSelector().GetMatchLabels(), types.MapNull(types.StringType), true, &diags),
		Paused:         types.BoolValue(spec.GetPaused()),
		MaxUnavailable: types.StringValue(cmp.Or(spec.GetMaxUnavailable(), apiv1.DefaultMaxUnavailable)),
		ScaleInOrder:   types.StringValue(cmp.Or(spec.GetScaleInOrder(), apiv1.DefaultScaleInOrder)),
		Template:       &tmpl,
		Status:         status,
	}, diags
}
