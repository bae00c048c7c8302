package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the virtplane_virtual_machine_replica_set model
// and the API's VirtualMachineInstanceReplicaSet; its template goes
// through the VM resource's (template_convert.go).

// replicaSetFromModel builds the replica set the configuration asks for.
// All values must be known (apply time).
func replicaSetFromModel(ctx context.Context, m *replicaSetModel) (*apiv1.VirtualMachineInstanceReplicaSet, diag.Diagnostics) {
	var diags diag.Diagnostics
	tmpl := m.Template
	if tmpl == nil {
		tmpl = &instanceTemplateModel{}
	}
	replicas := int32(m.Replicas.ValueInt64())
	return &apiv1.VirtualMachineInstanceReplicaSet{
		Metadata: &apiv1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: &replicas,
			Selector: &apiv1.LabelSelector{MatchLabels: stringMap(ctx, m.Selector, &diags)},
			Paused:   m.Paused.ValueBool(),
			Template: instanceTemplateFromModel(ctx, tmpl, &diags),
		},
	}, diags
}

// mergeReplicaSet applies what Terraform manages (want) onto the stored
// replica set (cur): the replica set's own labels and annotations and what
// mergeInstanceSpec keeps are left as stored.
func mergeReplicaSet(cur, want *apiv1.VirtualMachineInstanceReplicaSet) *apiv1.VirtualMachineInstanceReplicaSet {
	next := proto.Clone(cur).(*apiv1.VirtualMachineInstanceReplicaSet)
	if next.Spec == nil {
		next.Spec = &apiv1.VirtualMachineInstanceReplicaSetSpec{}
	}
	s, w := next.Spec, want.GetSpec()
	s.Replicas = w.Replicas
	s.Selector = w.GetSelector()
	s.Paused = w.GetPaused()
	if s.Template == nil {
		s.Template = &apiv1.VirtualMachineInstanceTemplateSpec{}
	}
	t := s.Template
	t.Metadata = &apiv1.ObjectMeta{
		Labels:      w.GetTemplate().GetMetadata().GetLabels(),
		Annotations: w.GetTemplate().GetMetadata().GetAnnotations(),
	}
	t.Spec = mergeInstanceSpec(t.GetSpec(), w.GetTemplate().GetSpec())
	return next
}

// replicaSetToModel maps a replica set and the names of its instances to
// the model, as poolToModel does.
func replicaSetToModel(rs *apiv1.VirtualMachineInstanceReplicaSet, names []string, prior *replicaSetModel, full bool) (replicaSetModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	var pt *instanceTemplateModel
	if prior != nil {
		pt = prior.Template
	}
	md, spec := rs.GetMetadata(), rs.GetSpec()
	tmpl := instanceTemplateToModel(spec.GetTemplate(), pt, full, &diags)
	st := rs.GetStatus()
	status, d := types.ObjectValue(replicaSetStatusAttrTypes, map[string]attr.Value{
		"replicas":       types.Int64Value(int64(st.GetReplicas())),
		"ready_replicas": types.Int64Value(int64(st.GetReadyReplicas())),
		"conditions":     conditionList(st.GetConditions(), &diags),
		"instance_names": stringList(names, &diags),
	})
	diags.Append(d...)
	return replicaSetModel{
		ID:        types.StringValue(apiv1.Ref(md.GetNamespace(), md.GetName())),
		Name:      types.StringValue(md.GetName()),
		Namespace: types.StringValue(md.GetNamespace()),
		UID:       types.StringValue(md.GetUid()),
		Replicas:  types.Int64Value(int64(spec.DesiredReplicas())),
		Selector:  mapFromAPI(spec.GetSelector().GetMatchLabels(), types.MapNull(types.StringType), true, &diags),
		Paused:    types.BoolValue(spec.GetPaused()),
		Template:  &tmpl,
		Status:    status,
	}, diags
}
