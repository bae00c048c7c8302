package provider

import (
	"cmp"
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the virtplane_virtual_machine_restore model and
// the API's VirtualMachineRestore.

func restoreFromModel(_ context.Context, m *restoreModel) (*apiv1.VirtualMachineRestore, diag.Diagnostics) {
	return &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		Spec: &apiv1.VirtualMachineRestoreSpec{
			Target:                m.VirtualMachine.ValueString(),
			Snapshot:              m.Snapshot.ValueString(),
			TargetReadinessPolicy: m.TargetReadinessPolicy.ValueString(),
		},
	}, nil
}

// restoreToModel maps a restore to the model, keeping prior's timeouts.
func restoreToModel(o *apiv1.VirtualMachineRestore, prior *restoreModel) (restoreModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	md, spec, st := o.GetMetadata(), o.GetSpec(), o.GetStatus()
	vols := make([]string, 0, len(st.GetRestores()))
	for _, v := range st.GetRestores() {
		vols = append(vols, v.GetVolumeName())
	}
	return restoreModel{
		ID:                    types.StringValue(apiv1.Ref(md.GetNamespace(), md.GetName())),
		Namespace:             types.StringValue(md.GetNamespace()),
		Name:                  types.StringValue(md.GetName()),
		VirtualMachine:        types.StringValue(spec.GetTarget()),
		Snapshot:              types.StringValue(spec.GetSnapshot()),
		TargetReadinessPolicy: types.StringValue(cmp.Or(spec.GetTargetReadinessPolicy(), apiv1.ReadinessWaitGracePeriod)),
		UID:                   types.StringValue(md.GetUid()),
		Phase:                 optString(st.GetPhase()),
		Complete:              types.BoolValue(st.GetComplete()),
		RestoreTime:           optTime(st.GetRestoreTime()),
		RestoredVolumes:       stringList(vols, &diags),
		Timeouts:              prior.Timeouts,
	}, diags
}
