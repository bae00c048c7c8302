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

// The virtplane_virtual_machine_replica_set model and its conversions to
// and from the API's VirtualMachineInstanceReplicaSet; its template goes
// through the VM resource's (template_convert.go).

// replicaSetModel holds what the replica set resource and data source
// share.
type replicaSetModel struct {
	ID        types.String           `tfsdk:"id"`
	Name      types.String           `tfsdk:"name"`
	Namespace types.String           `tfsdk:"namespace"`
	UID       types.String           `tfsdk:"uid"`
	Replicas  types.Int64            `tfsdk:"replicas"`
	Selector  types.Map              `tfsdk:"selector"`
	Paused    types.Bool             `tfsdk:"paused"`
	Template  *instanceTemplateModel `tfsdk:"template"`
	Status    types.Object           `tfsdk:"status"`
}

// replicaSetResourceModel is the resource's state.
type replicaSetResourceModel struct {
	replicaSetModel
	WaitForReady types.Bool     `tfsdk:"wait_for_ready"`
	Timeouts     timeouts.Value `tfsdk:"timeouts"`
}

// replicaSetStatusAttrTypes is the object type of the replica set's status.
var replicaSetStatusAttrTypes = replicaStatusAttrTypes("instance_names", nil)

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
		ID:        types.StringValue(namespacedID(md.GetNamespace(), md.GetName())),
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

// replicaSetAttributePath maps an API field path of a replica set to the
// attribute that set it; the template's spec maps as the VM resource's
// does, under template.
func replicaSetAttributePath(field string) (path.Path, bool) {
	const tmpl = "spec.template"
	base := path.Root("template")
	norm, args := normalizeFieldPath(field)
	switch {
	case strings.HasPrefix(norm, tmpl+".metadata.labels"):
		if len(args) > 0 {
			return base.AtName("labels").AtMapKey(args[0]), true
		}
		return base.AtName("labels"), true
	case strings.HasPrefix(field, tmpl+"."):
		// spec.template.metadata.annotations and spec.template.spec...
		// are a VM's fields of the same names.
		if p, ok := attributePath(field); ok {
			return underPath(base, p), true
		}
		return base, true
	case field == tmpl:
		return base, true
	}
	return replicaAttributePath(field)
}
