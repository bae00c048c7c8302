package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_virtual_machine_replica_set model: what the resource and
// the data source share, and the resource's state.

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
