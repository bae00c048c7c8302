package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Create, read, update and delete of
// virtplane_virtual_machine_replica_set: the replica kinds' shared
// operations (replicas_crud.go) with a replica set's calls, model and
// waits (replicaset_wait.go).

// replicaSetOps is a replica set as the shared operations use it.
var replicaSetOps = replicaOps[*apiv1.VirtualMachineInstanceReplicaSet, replicaSetView, replicaSetResourceModel]{
	replicas: "instances",
	create: func(ctx context.Context, c *client.Client, rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		return c.ReplicaSets.Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: rs})
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		return c.ReplicaSets.Get(ctx, &apiv1.GetReplicaSetRequest{Key: key})
	},
	update: func(ctx context.Context, c *client.Client, rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		return c.ReplicaSets.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: rs})
	},
	del: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error {
		_, err := c.ReplicaSets.Delete(ctx, &apiv1.DeleteReplicaSetRequest{Key: key, Options: o})
		return err
	},
	fromModel: func(ctx context.Context, m *replicaSetResourceModel) (*apiv1.VirtualMachineInstanceReplicaSet, diag.Diagnostics) {
		return replicaSetFromModel(ctx, &m.replicaSetModel)
	},
	merge: mergeReplicaSet,
	settings: func(m *replicaSetResourceModel) replicaSettings {
		return replicaSettings{id: m.ID, namespace: m.Namespace, name: m.Name, uid: m.UID,
			waitForReady: m.WaitForReady, timeouts: m.Timeouts}
	},
	toState: replicaSetState,
	view: func(rs *apiv1.VirtualMachineInstanceReplicaSet) replicaSetView {
		return replicaSetView{rs: rs}
	},
	refresh: func(ctx context.Context, c *client.Client, rs *apiv1.VirtualMachineInstanceReplicaSet) (replicaSetView, error) {
		vmis, err := replicaSetInstances(ctx, c, rs)
		return replicaSetView{rs: rs, vmis: vmis}, err
	},
	wait:     waitReplicaSet,
	judge:    judgeReplicaSet,
	describe: describeReplicaSet,
	// Instances run until they end; a replica set replaces them.
	ready: func(*apiv1.VirtualMachineInstanceReplicaSet) bool { return true },
	targetText: func(_ replicaTarget, rs *apiv1.VirtualMachineInstanceReplicaSet) string {
		return replicaSetTargetDescription(rs)
	},
}

// replicaSetState is the state that records replica set v, keeping the
// provider-only settings of prior (the plan or the previous state).
func replicaSetState(v replicaSetView, prior *replicaSetResourceModel) (replicaSetResourceModel, diag.Diagnostics) {
	m, d := replicaSetToModel(v.rs, liveInstanceNames(v.vmis), &prior.replicaSetModel, false)
	return replicaSetResourceModel{replicaSetModel: m, WaitForReady: waitForReadyOr(prior.WaitForReady), Timeouts: prior.Timeouts}, d
}

// liveInstanceNames are the names of the instances that are not ending
// (neither final nor being deleted), as status.replicas counts them.
func liveInstanceNames(vmis []*apiv1.VirtualMachineInstance) []string {
	out := []string{}
	for _, v := range vmis {
		if v.GetMetadata().GetDeletionTimestamp() == nil && !apiv1.IsFinal(v.GetStatus().GetPhase()) {
			out = append(out, v.GetMetadata().GetName())
		}
	}
	return out
}
