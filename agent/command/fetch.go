package command

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The helpers below hide the per-kind RPCs behind the object interface;
// errors are raw gRPC errors for describeError.

func getObject(ctx context.Context, c *client.Client, res *resource, namespace, name string) (object, error) {
	key := &apiv1.ObjectKey{Namespace: namespace, Name: name}
	switch res {
	case vmResource:
		return nilSafe(c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key}))
	case vmiResource:
		return nilSafe(c.VMIs.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: key}))
	case migrationResource:
		return nilSafe(c.Migrations.Get(ctx, &apiv1.GetMigrationRequest{Key: key}))
	case replicaSetResource:
		return nilSafe(c.ReplicaSets.Get(ctx, &apiv1.GetReplicaSetRequest{Key: key}))
	case poolResource:
		return nilSafe(c.Pools.Get(ctx, &apiv1.GetPoolRequest{Key: key}))
	case snapshotResource:
		return nilSafe(c.Snapshots.Get(ctx, &apiv1.GetSnapshotRequest{Key: key}))
	case snapshotContentResource:
		return nilSafe(c.SnapshotContents.Get(ctx, &apiv1.GetSnapshotContentRequest{Key: key}))
	case restoreResource:
		return nilSafe(c.Restores.Get(ctx, &apiv1.GetRestoreRequest{Key: key}))
	case cloneResource:
		return nilSafe(c.Clones.Get(ctx, &apiv1.GetCloneRequest{Key: key}))
	default:
		return nilSafe(c.Nodes.Get(ctx, &apiv1.GetNodeRequest{Name: name}))
	}
}

// listObjects lists res a page of client.ListPageSize at a time, as
// kubectl does, and sorts the items by namespace and name (paged lists
// come in key order).
func listObjects(ctx context.Context, c *client.Client, res *resource, namespace, selector string) ([]object, error) {
	opts := &apiv1.ListOptions{Namespace: namespace, LabelSelector: selector}
	var (
		items []object
		err   error
	)
	switch res {
	case vmResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListVirtualMachinesResponse, error) {
			return c.VMs.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: o})
		})
	case vmiResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListVirtualMachineInstancesResponse, error) {
			return c.VMIs.List(ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: o})
		})
	case migrationResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListMigrationsResponse, error) {
			return c.Migrations.List(ctx, &apiv1.ListMigrationsRequest{Options: o})
		})
	case replicaSetResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListReplicaSetsResponse, error) {
			return c.ReplicaSets.List(ctx, &apiv1.ListReplicaSetsRequest{Options: o})
		})
	case poolResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListPoolsResponse, error) {
			return c.Pools.List(ctx, &apiv1.ListPoolsRequest{Options: o})
		})
	case snapshotResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListSnapshotsResponse, error) {
			return c.Snapshots.List(ctx, &apiv1.ListSnapshotsRequest{Options: o})
		})
	case snapshotContentResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListSnapshotContentsResponse, error) {
			return c.SnapshotContents.List(ctx, &apiv1.ListSnapshotContentsRequest{Options: o})
		})
	case restoreResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListRestoresResponse, error) {
			return c.Restores.List(ctx, &apiv1.ListRestoresRequest{Options: o})
		})
	case cloneResource:
		items, err = listPaged(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListClonesResponse, error) {
			return c.Clones.List(ctx, &apiv1.ListClonesRequest{Options: o})
		})
	default:
		resp, err := c.Nodes.List(ctx, &apiv1.ListNodesRequest{LabelSelector: selector})
		return objects(resp.GetItems()), err
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(items, func(a, b object) int {
		am, bm := a.GetMetadata(), b.GetMetadata()
		return cmp.Or(strings.Compare(am.GetNamespace(), bm.GetNamespace()), strings.Compare(am.GetName(), bm.GetName()))
	})
	return items, nil
}

// listPaged is client.ListAll as objects.
func listPaged[T object, R client.ListResponse[T]](ctx context.Context, opts *apiv1.ListOptions, list func(context.Context, *apiv1.ListOptions) (R, error)) ([]object, error) {
	items, _, err := client.ListAll(ctx, opts, list)
	return objects(items), err
}

// watchObjects calls fn for every event until the stream ends (nil), fails,
// or fn returns an error (returned as is). obj is nil for RESET and SYNCED.
func watchObjects(ctx context.Context, c *client.Client, res *resource, opts *apiv1.WatchOptions, fn func(apiv1.EventType, object) error) error {
	switch res {
	case vmResource:
		s, err := c.VMs.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	case vmiResource:
		s, err := c.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	case migrationResource:
		s, err := c.Migrations.Watch(ctx, &apiv1.WatchMigrationsRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	case replicaSetResource:
		s, err := c.ReplicaSets.Watch(ctx, &apiv1.WatchReplicaSetsRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	case poolResource:
		s, err := c.Pools.Watch(ctx, &apiv1.WatchPoolsRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	case snapshotResource:
		s, err := c.Snapshots.Watch(ctx, &apiv1.WatchSnapshotsRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	case snapshotContentResource:
		s, err := c.SnapshotContents.Watch(ctx, &apiv1.WatchSnapshotContentsRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	case restoreResource:
		s, err := c.Restores.Watch(ctx, &apiv1.WatchRestoresRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	case cloneResource:
		s, err := c.Clones.Watch(ctx, &apiv1.WatchClonesRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	default:
		s, err := c.Nodes.Watch(ctx, &apiv1.WatchNodesRequest{Options: opts})
		if err != nil {
			return err
		}
		return forEachEvent(s, fn)
	}
}

// createObject and updateObject write an object apply read from a
// manifest (a kind of manifestKinds).
func createObject(ctx context.Context, c *client.Client, obj object) error {
	var err error
	switch o := obj.(type) {
	case *apiv1.VirtualMachine:
		_, err = c.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: o})
	case *apiv1.VirtualMachineInstanceReplicaSet:
		_, err = c.ReplicaSets.Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: o})
	case *apiv1.VirtualMachinePool:
		_, err = c.Pools.Create(ctx, &apiv1.CreatePoolRequest{Pool: o})
	case *apiv1.VirtualMachineSnapshot:
		_, err = c.Snapshots.Create(ctx, &apiv1.CreateSnapshotRequest{Snapshot: o})
	case *apiv1.VirtualMachineRestore:
		_, err = c.Restores.Create(ctx, &apiv1.CreateRestoreRequest{Restore: o})
	case *apiv1.VirtualMachineClone:
		_, err = c.Clones.Create(ctx, &apiv1.CreateCloneRequest{Clone: o})
	default:
		panic(fmt.Sprintf("createObject: unexpected %T", obj))
	}
	return err
}

func updateObject(ctx context.Context, c *client.Client, obj object) (object, error) {
	switch o := obj.(type) {
	case *apiv1.VirtualMachine:
		return nilSafe(c.VMs.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: o}))
	case *apiv1.VirtualMachineInstanceReplicaSet:
		return nilSafe(c.ReplicaSets.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: o}))
	case *apiv1.VirtualMachinePool:
		return nilSafe(c.Pools.Update(ctx, &apiv1.UpdatePoolRequest{Pool: o}))
	case *apiv1.VirtualMachineSnapshot, *apiv1.VirtualMachineRestore, *apiv1.VirtualMachineClone:
		return applyImmutable(ctx, c, obj)
	}
	panic(fmt.Sprintf("updateObject: unexpected %T", obj))
}

// deleteObject deletes a VM (with its snapshots when deleteSnapshots),
// replica set, pool, snapshot, snapshot content, restore or clone; the
// others have commands of their own.
func deleteObject(ctx context.Context, c *client.Client, res *resource, key *apiv1.ObjectKey, deleteSnapshots bool) error {
	var err error
	switch res {
	case vmResource:
		_, err = c.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key, DeleteSnapshots: deleteSnapshots})
	case snapshotResource:
		_, err = c.Snapshots.Delete(ctx, &apiv1.DeleteSnapshotRequest{Key: key})
	case snapshotContentResource:
		_, err = c.SnapshotContents.Delete(ctx, &apiv1.DeleteSnapshotContentRequest{Key: key})
	case restoreResource:
		_, err = c.Restores.Delete(ctx, &apiv1.DeleteRestoreRequest{Key: key})
	case cloneResource:
		_, err = c.Clones.Delete(ctx, &apiv1.DeleteCloneRequest{Key: key})
	case replicaSetResource:
		_, err = c.ReplicaSets.Delete(ctx, &apiv1.DeleteReplicaSetRequest{Key: key})
	case poolResource:
		_, err = c.Pools.Delete(ctx, &apiv1.DeletePoolRequest{Key: key})
	default:
		panic(fmt.Sprintf("deleteObject: unexpected %s", res.Kind))
	}
	return err
}

// watchEvent is the event message of one kind's Watch stream.
type watchEvent[T object] interface {
	GetType() apiv1.EventType
	GetObject() T
}

// forEachEvent is watchObjects' loop over one kind's stream.
func forEachEvent[E watchEvent[T], T object](s client.Stream[E], fn func(apiv1.EventType, object) error) error {
	return client.EachEvent(s, func(ev E) error {
		obj, _ := nilSafe(ev.GetObject(), nil)
		return fn(ev.GetType(), obj)
	})
}

// nilSafe keeps a nil *T from becoming a non-nil object interface.
func nilSafe[T object](o T, err error) (object, error) {
	if err != nil || !o.ProtoReflect().IsValid() {
		return nil, err
	}
	return o, nil
}

func objects[T object](items []T) []object {
	out := make([]object, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}
