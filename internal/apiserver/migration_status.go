package apiserver

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// checkNodeStatusWrite decides whether node may replace cur's status with
// next's. The node the instance runs on reports on it and cannot move it,
// but for one move: the source of a migration that just completed hands
// the instance to the target, in the same write that records the end.
// The target of a running migration writes only its own fields of the
// migration state (when it is ready, its domain XML), or, before the
// source started, that it failed. What the controller decided (which
// migration, between which nodes, to which destination, with which
// settings, whether to abort) no node changes.
func checkNodeStatusWrite(cur, next *apiv1.VirtualMachineInstance, node string) error {
	key := cur.GetMetadata().GetNamespace() + "/" + cur.GetMetadata().GetName()
	if cur.GetStatus().GetEvacuationNodeName() != next.GetStatus().GetEvacuationNodeName() {
		// The server's mark: a node may not excuse itself from a drain.
		return status.Errorf(codes.PermissionDenied, "status.evacuation_node_name: node %s may not change it from %q to %q",
			node, cur.GetStatus().GetEvacuationNodeName(), next.GetStatus().GetEvacuationNodeName())
	}
	was, is := cur.GetStatus().GetMigrationState(), next.GetStatus().GetMigrationState()
	if err := controllerFieldsKept(was, is); err != nil {
		return err
	}
	if err := destinationKept(was, is, "node "+node); err != nil {
		return err
	}
	switch {
	case cur.GetStatus().GetNodeName() == node || (cur.GetStatus().GetNodeName() == "" && onNode(cur, node)):
		from, to := cur.GetStatus().GetNodeName(), next.GetStatus().GetNodeName()
		if from == to {
			return nil
		}
		if was != nil && to == was.GetTargetNode() && is.GetCompleted() && !is.GetFailed() && !was.GetCompleted() {
			return nil
		}
		return status.Errorf(codes.PermissionDenied, "status.node_name: node %s may not change it from %q to %q (only to a completed migration's target)", node, from, to)
	case migrationTarget(cur, node) && !was.GetCompleted():
		// Everything but the target's fields stays as it is.
		want := proto.Clone(cur.GetStatus()).(*apiv1.VirtualMachineInstanceStatus)
		ws := want.MigrationState
		ws.TargetReadyTimestamp, ws.TargetDomainXml = is.GetTargetReadyTimestamp(), is.GetTargetDomainXml()
		if was.GetStartTimestamp() == nil && is.GetFailed() {
			ws.Completed, ws.Failed, ws.FailureReason, ws.EndTimestamp = true, true, is.GetFailureReason(), is.GetEndTimestamp()
		}
		if !proto.Equal(want, next.GetStatus()) {
			return status.Errorf(codes.PermissionDenied, "status: node %s is the target of %s's migration and may change only the migration state's target fields", node, key)
		}
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "node %s may update only its own instances; %s runs on %q", node, key, cur.GetStatus().GetNodeName())
}

// controllerFieldsKept refuses a node's change of what the migration
// controller decided at the handoff.
func controllerFieldsKept(was, is *apiv1.MigrationState) error {
	if was == nil && is == nil {
		return nil
	}
	if was == nil || is == nil ||
		was.GetMigrationUid() != is.GetMigrationUid() || was.GetSourceNode() != is.GetSourceNode() ||
		was.GetTargetNode() != is.GetTargetNode() || was.GetMethod() != is.GetMethod() ||
		was.GetAbortRequested() != is.GetAbortRequested() || !proto.Equal(was.GetConfiguration(), is.GetConfiguration()) {
		return status.Error(codes.PermissionDenied, "status.migration_state: the migration, its nodes, method, configuration and abort request are the controller's; a node may not change them")
	}
	return nil
}

// destinationKept refuses any caller's change of where a migration goes,
// naming every field changed: only the migration controller writes it
// (through the store, at the handoff), built from the target's
// registration, since the source host's libvirtd connects to it as root
// (a qemu+ext URI runs a command there, an address sends the guest's
// memory to it). who names the caller.
func destinationKept(was, is *apiv1.MigrationState, who string) error {
	var changed []string
	for _, f := range []struct{ name, from, to string }{
		{"target_libvirt_uri", was.GetTargetLibvirtUri(), is.GetTargetLibvirtUri()},
		{"target_node_address", was.GetTargetNodeAddress(), is.GetTargetNodeAddress()},
	} {
		if f.from != f.to {
			changed = append(changed, fmt.Sprintf("status.migration_state.%s: %s may not change it from %q to %q", f.name, who, f.from, f.to))
		}
	}
	if len(changed) == 0 {
		return nil
	}
	return status.Errorf(codes.PermissionDenied, "%s: the server builds a migration's destination from the target's registration", strings.Join(changed, "; "))
}
