package nodeagent

import (
	"context"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Live migration on the node (KubeVirt's virt-handler migration-source.go
// and migration-target.go). The controller hands a migration over in the
// instance's migration_state; each node sees its part there:
//
//   - the target (migration_state.target_node, an instance it sees
//     through the migration-target label) prepares blank disks, has a
//     launcher define the receiving domain, publishes where it receives
//     and the domain's XML, and renews the receiving domain while the
//     migration runs; if the migration fails it removes all of it;
//   - the source (the node the instance runs on) starts libvirt's job
//     through its launcher once the target is ready, reports progress,
//     aborts on request, and records the end; on success it hands the
//     instance to the target in the same write (node_name), then removes
//     its stopped domain, launcher and files, the volumes included (they
//     were copied to the target).
//
// Both survive an agent restart: the launchers keep running, the state
// record says what this node was doing, and the launcher reports the
// job's outcome from libvirt.

// migrationPass handles the key when a migration decides what this node
// does with it; handled is false when the ordinary handler should run,
// with vmi as the instance it should see (a migrated instance this node
// sees only through the target label until the controller relabels it).
func (a *Agent) migrationPass(ctx context.Context, key string, own *apiv1.VirtualMachineInstance) (res controller.Result, vmi *apiv1.VirtualMachineInstance, handled bool, err error) {
	self := a.opts.NodeName
	target, _ := a.targets.GetByKey(key)
	if target != nil && !a.admissible(target) {
		target = nil
	}
	if own != nil {
		st := own.GetStatus().GetMigrationState()
		switch node := own.GetStatus().GetNodeName(); {
		case node == self && migrating(own) && st.GetSourceNode() == self && sourceActs(st):
			res, err = a.migrateOut(ctx, own)
			return res, own, true, err
		case node != "" && node != self:
			// Handed to another node by a migration (the label follows
			// later): this node's copy goes, and nothing is reported.
			res, err = a.migratedAway(ctx, key, own)
			return res, own, true, err
		}
		return res, own, false, nil
	}
	if target == nil {
		return res, nil, false, nil
	}
	st := target.GetStatus().GetMigrationState()
	switch {
	case target.GetStatus().GetNodeName() == self:
		// Ours now; the node label follows.
		return res, target, false, nil
	case st.GetTargetNode() != self:
		return res, nil, false, nil
	case !st.GetCompleted():
		res, err = a.migrateIn(ctx, target)
		return res, target, true, err
	case st.GetFailed():
		res, err = a.incomingFailed(ctx, key, target)
		return res, target, true, err
	}
	// Completed: the source is handing the instance over.
	return controller.Result{RequeueAfter: a.opts.Timing.MigrationPoll}, target, true, nil
}

// migrating reports an instance with a migration handed to the nodes and
// not ended.
func migrating(v *apiv1.VirtualMachineInstance) bool {
	st := v.GetStatus().GetMigrationState()
	return st.GetMigrationUid() != "" && !st.GetCompleted() && !apiv1.IsFinal(v.GetStatus().GetPhase())
}

// migratedAway removes what is left here of an instance that runs on
// another node now: its stopped domain, launcher and files. Its VM's
// volumes go too when a migration copied them to where it runs.
func (a *Agent) migratedAway(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	rec, err := a.recordFor(key)
	if err != nil || rec == nil || rec.UID != vmi.GetMetadata().GetUid() {
		return controller.Result{}, err
	}
	res, err := a.removeLocal(ctx, rec)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	a.log.Info("instance migrated away; local copy removed", "vmi", key, "now_on", vmi.GetStatus().GetNodeName(),
		"migration_uid", vmi.GetStatus().GetMigrationState().GetMigrationUid())
	return controller.Result{}, nil
}

// removeLocal removes the record's domain (which must not run: a
// migrated-away domain is shut off), launcher and files, reporting
// nothing on the instance (it is not this node's to report on).
func (a *Agent) removeLocal(ctx context.Context, rec *state.VMI) (controller.Result, error) {
	e, err := a.ensureLauncher(ctx, nil, rec)
	if err != nil {
		if unavailable(err) {
			return controller.Result{RequeueAfter: a.opts.Timing.LivenessInterval}, nil
		}
		return controller.Result{}, err
	}
	dom, err := a.getDomain(ctx, e)
	if err != nil {
		return controller.Result{}, err
	}
	return a.deleteAndCleanup(ctx, nil, rec, e, dom)
}

// vmiForTarget is the instance as the target's launcher builds it: placed
// here (the domain's metadata names this node), with the source domain's
// UUID.
func (a *Agent) vmiForTarget(v *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstance {
	out := proto.Clone(v).(*apiv1.VirtualMachineInstance)
	out.Status.NodeName = a.opts.NodeName
	return out
}
