package command

import (
	"context"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The kinds of replicas_service.proto. Replica sets and pools keep many
// instances or VMs of one template; `scale` sets how many.

var replicaSetResource = kind[*apiv1.VirtualMachineInstanceReplicaSet, *apiv1.ReplicaSetEvent]{
	resource: resource{
		Kind: apiv1.KindReplicaSet, Singular: "virtualmachineinstancereplicaset", Namespaced: true,
		names: []string{"rs", "replicaset", "replicasets",
			"vmirs", "virtualmachineinstancereplicaset", "virtualmachineinstancereplicasets"},
		// kubectl get rs's columns.
		columns: []string{"NAME", "DESIRED", "CURRENT", "READY", "AGE"},
	},
	row: func(rs *apiv1.VirtualMachineInstanceReplicaSet, now time.Time) []string {
		return []string{
			rs.GetMetadata().GetName(),
			count(rs.GetSpec().DesiredReplicas()),
			count(rs.GetStatus().GetReplicas()),
			count(rs.GetStatus().GetReadyReplicas()),
			age(rs.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		return c.ReplicaSets.Get(ctx, &apiv1.GetReplicaSetRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListReplicaSetsResponse, error) {
		return c.ReplicaSets.List(ctx, &apiv1.ListReplicaSetsRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.ReplicaSetEvent], error) {
		return c.ReplicaSets.Watch(ctx, &apiv1.WatchReplicaSetsRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		return c.ReplicaSets.Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: rs})
	},
	update: func(ctx context.Context, c *client.Client, rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		return c.ReplicaSets.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: rs})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		return c.ReplicaSets.Delete(ctx, &apiv1.DeleteReplicaSetRequest{Key: key})
	},
	scale: func(ctx context.Context, c *client.Client, req *apiv1.ScaleRequest) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		return c.ReplicaSets.Scale(ctx, req)
	},
}.define()

var poolResource = kind[*apiv1.VirtualMachinePool, *apiv1.PoolEvent]{
	resource: resource{
		Kind: apiv1.KindPool, Singular: "virtualmachinepool", Namespaced: true,
		names:   []string{"pool", "pools", "vmpool", "vmpools", "virtualmachinepool", "virtualmachinepools"},
		columns: []string{"NAME", "DESIRED", "CURRENT", "READY", "UPDATED", "AGE"},
	},
	row: func(p *apiv1.VirtualMachinePool, now time.Time) []string {
		return []string{
			p.GetMetadata().GetName(),
			count(p.GetSpec().DesiredReplicas()),
			count(p.GetStatus().GetReplicas()),
			count(p.GetStatus().GetReadyReplicas()),
			count(p.GetStatus().GetUpdatedReplicas()),
			age(p.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachinePool, error) {
		return c.Pools.Get(ctx, &apiv1.GetPoolRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListPoolsResponse, error) {
		return c.Pools.List(ctx, &apiv1.ListPoolsRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.PoolEvent], error) {
		return c.Pools.Watch(ctx, &apiv1.WatchPoolsRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, p *apiv1.VirtualMachinePool) (*apiv1.VirtualMachinePool, error) {
		return c.Pools.Create(ctx, &apiv1.CreatePoolRequest{Pool: p})
	},
	update: func(ctx context.Context, c *client.Client, p *apiv1.VirtualMachinePool) (*apiv1.VirtualMachinePool, error) {
		return c.Pools.Update(ctx, &apiv1.UpdatePoolRequest{Pool: p})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachinePool, error) {
		return c.Pools.Delete(ctx, &apiv1.DeletePoolRequest{Key: key})
	},
	scale: func(ctx context.Context, c *client.Client, req *apiv1.ScaleRequest) (*apiv1.VirtualMachinePool, error) {
		return c.Pools.Scale(ctx, req)
	},
}.define()
