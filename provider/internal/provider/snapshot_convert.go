package provider

import (
	"cmp"
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the virtplane_virtual_machine_snapshot model
// and the API's VirtualMachineSnapshot.

// snapshotFromModel is the snapshot the configuration asks for. All
// values are known (apply time) and validated.
func snapshotFromModel(_ context.Context, m *snapshotModel) (*apiv1.VirtualMachineSnapshot, diag.Diagnostics) {
	var diags diag.Diagnostics
	secs, err := parseDeadline(cmp.Or(m.FailureDeadline.ValueString(), defaultFailureDeadline))
	if err != nil {
		diags.AddAttributeError(path.Root("failure_deadline"), "Invalid failure_deadline", "failure_deadline "+err.Error()+".")
	}
	return &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		Spec: &apiv1.VirtualMachineSnapshotSpec{
			Source:                 m.VirtualMachine.ValueString(),
			DeletionPolicy:         m.DeletionPolicy.ValueString(),
			FailureDeadlineSeconds: &secs,
		},
	}, diags
}

// snapshotToModel maps a snapshot to the model. prior (the state or plan,
// nil on import and in the data source) keeps the spelling of
// failure_deadline when it means what the API has.
func snapshotToModel(s *apiv1.VirtualMachineSnapshot, prior *snapshotModel) (snapshotModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	md, spec, st := s.GetMetadata(), s.GetSpec(), s.GetStatus()
	secs := int64(apiv1.DefaultSnapshotFailureDeadlineSeconds)
	if spec.FailureDeadlineSeconds != nil {
		secs = spec.GetFailureDeadlineSeconds()
	}
	deadline := formatDeadline(secs)
	if prior != nil && !prior.FailureDeadline.IsNull() && !prior.FailureDeadline.IsUnknown() && sameDeadline(prior.FailureDeadline.ValueString(), deadline) {
		deadline = prior.FailureDeadline.ValueString()
	}
	return snapshotModel{
		ID:              types.StringValue(apiv1.Ref(md.GetNamespace(), md.GetName())),
		Namespace:       types.StringValue(md.GetNamespace()),
		Name:            types.StringValue(md.GetName()),
		VirtualMachine:  types.StringValue(spec.GetSource()),
		DeletionPolicy:  types.StringValue(cmp.Or(spec.GetDeletionPolicy(), apiv1.DeletionPolicyDelete)),
		FailureDeadline: types.StringValue(deadline),
		UID:             types.StringValue(md.GetUid()),
		Phase:           optString(st.GetPhase()),
		ReadyToUse:      types.BoolValue(st.GetReadyToUse()),
		CreationTime:    optTime(st.GetCreationTime()),
		Indications:     stringList(st.GetIndications(), &diags),
		IncludedVolumes: stringList(st.GetIncludedVolumes(), &diags),
		ExcludedVolumes: stringList(st.GetExcludedVolumes(), &diags),
		NodeName:        optString(st.GetNodeName()),
		ContentName:     optString(st.GetContentName()),
	}, diags
}

// formatDeadline spells seconds as the shortest Go duration: 300 is "5m",
// 5400 "1h30m", 0 "0s".
func formatDeadline(secs int64) string {
	return shortDuration(time.Duration(secs) * time.Second)
}
