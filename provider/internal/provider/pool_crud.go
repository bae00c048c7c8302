package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Create, read, update and delete of virtplane_virtual_machine_pool: the
// replica kinds' shared operations (replicas_crud.go) with a pool's
// calls, model and waits (pool_wait.go).

// poolOps is a pool as the shared operations use it.
var poolOps = replicaOps[*apiv1.VirtualMachinePool, poolView, poolResourceModel]{
	replicas: "VMs",
	create: func(ctx context.Context, c *client.Client, p *apiv1.VirtualMachinePool) (*apiv1.VirtualMachinePool, error) {
		return c.Pools.Create(ctx, &apiv1.CreatePoolRequest{Pool: p})
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachinePool, error) {
		return c.Pools.Get(ctx, &apiv1.GetPoolRequest{Key: key})
	},
	update: func(ctx context.Context, c *client.Client, p *apiv1.VirtualMachinePool) (*apiv1.VirtualMachinePool, error) {
		return c.Pools.Update(ctx, &apiv1.UpdatePoolRequest{Pool: p})
	},
	del: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error {
		_, err := c.Pools.Delete(ctx, &apiv1.DeletePoolRequest{Key: key, Options: o})
		return err
	},
	fromModel: func(ctx context.Context, m *poolResourceModel) (*apiv1.VirtualMachinePool, diag.Diagnostics) {
		return poolFromModel(ctx, &m.poolModel)
	},
	merge: mergePool,
	settings: func(m *poolResourceModel) replicaSettings {
		return replicaSettings{id: m.ID, namespace: m.Namespace, name: m.Name, uid: m.UID,
			waitForReady: m.WaitForReady, timeouts: m.Timeouts}
	},
	toState:  poolState,
	view:     func(p *apiv1.VirtualMachinePool) poolView { return poolView{pool: p} },
	refresh:  refreshPool,
	wait:     waitPool,
	judge:    judgePool,
	describe: describePool,
	ready: func(p *apiv1.VirtualMachinePool) bool {
		return runsReplicas(p.GetSpec().GetVirtualMachineTemplate().GetSpec())
	},
	targetText: poolTargetDescription,
}

// refreshPool reads the VMs of pool p, without their instances.
func refreshPool(ctx context.Context, c *client.Client, p *apiv1.VirtualMachinePool) (poolView, error) {
	vms, err := poolVMs(ctx, c, p)
	if err != nil {
		return poolView{}, err
	}
	v := poolView{pool: p}
	for _, vm := range vms {
		v.vms = append(v.vms, vmView{vm: vm})
	}
	return v, nil
}

// poolState is the state that records pool v, keeping the provider-only
// settings of prior (the plan or the previous state).
func poolState(v poolView, prior *poolResourceModel) (poolResourceModel, diag.Diagnostics) {
	vms := make([]*apiv1.VirtualMachine, len(v.vms))
	for i, m := range v.vms {
		vms[i] = m.vm
	}
	m, d := poolToModel(v.pool, liveNames(vms), &prior.poolModel, false)
	return poolResourceModel{poolModel: m, WaitForReady: waitForReadyOr(prior.WaitForReady), Timeouts: prior.Timeouts}, d
}
