package migration

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/imagepull"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
)

// target is the role of the node an instance migrates to.
type target struct{ *Roles }

// receive is the target's part while the migration runs: prepare the
// files once, have the launcher define the receiving domain, publish
// that it is ready, and renew the receiving domain on every pass
// (it is removed when the renewals stop: an agent that died cannot own
// the guest afterwards).
func (t target) receive(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	key := informer.Key(vmi)
	st := vmi.GetStatus().GetMigrationState()
	uid := st.GetMigrationUid()
	poll := controller.Result{RequeueAfter: t.opts.Poll}
	if t.opts.Address == "" {
		return controller.Result{}, t.fail(ctx, vmi, fmt.Sprintf("node %s takes no migrations: its agent has no --migration-address", t.opts.NodeName))
	}
	rec, err := t.opts.Records.Record(key)
	if err != nil {
		return controller.Result{}, err
	}
	if rec != nil && rec.UID != vmi.GetMetadata().GetUid() {
		// An older instance of the same name still has a domain here.
		return controller.Result{}, t.fail(ctx, vmi, fmt.Sprintf("node %s still holds an earlier instance of %s", t.opts.NodeName, key))
	}
	if rec != nil && rec.MigratedAway != "" {
		// Coming back before this node removed what an earlier migration
		// away left: remove it first (its volumes are the other node's).
		res, err := t.opts.Handler.RemoveLocal(ctx, rec)
		if err != nil {
			return controller.Result{}, err
		}
		return controller.Result{RequeueAfter: max(res.RequeueAfter, t.opts.Poll)}, nil
	}
	if rec == nil {
		if rec, err = t.opts.Records.NewRecord(vmi); err != nil {
			return controller.Result{}, fmt.Errorf("recording %s: %w", key, err)
		}
		rec.IncomingMigration = uid
		if err := t.opts.Records.PutVMI(rec); err != nil {
			return controller.Result{}, fmt.Errorf("saving state record of %s: %w", key, err)
		}
	}
	if st.GetStartTimestamp() == nil && st.GetAbortRequested() {
		return poll, nil // the source ends it
	}

	var opts *launcherpb.SyncOptions
	if rec.IncomingPrepared != uid {
		var waiting bool
		if opts, waiting, err = t.prepare(ctx, vmi, rec); err != nil || waiting {
			if waiting {
				return controller.Result{RequeueAfter: 2 * time.Second}, nil
			}
			return controller.Result{}, err
		}
	}
	e, err := t.opts.Launchers.Ensure(ctx, vmi, rec)
	if err != nil {
		return controller.Result{}, fmt.Errorf("launcher for the migration target of %s: %w", key, err)
	}
	cctx, cancel := context.WithTimeout(ctx, t.opts.CallTimeout)
	defer cancel()
	ms, err := e.Client.Incoming(cctx, uid, t.forTarget(vmi), opts, t.opts.IncomingLease)
	if err != nil {
		if rec.IncomingPrepared == uid || launchers.Unavailable(err) {
			return controller.Result{}, fmt.Errorf("renewing the migration target of %s: %w", key, err)
		}
		return controller.Result{}, t.fail(ctx, vmi, "defining the receiving domain: "+launchers.ErrorMessage(err))
	}
	if rec.IncomingPrepared != uid {
		next := *rec
		next.IncomingPrepared = uid
		if err := t.putRecord(rec, &next); err != nil {
			return controller.Result{}, fmt.Errorf("saving state record of %s: %w", key, err)
		}
		t.log.Info("migration target ready", "vmi", key, "migration_uid", uid, "source", st.GetSourceNode())
	}
	if err := t.opts.Launchers.Persist(rec, e); err != nil {
		return controller.Result{}, err
	}
	if err := t.opts.Status.Report(ctx, vmi, t.ready(ms)); err != nil {
		return controller.Result{}, err
	}
	return poll, nil
}

// prepare pulls the images and prepares the files of the receiving
// domain, once per migration; waiting while an image is still pulled. A
// failure the migration cannot get past fails it (err nil then).
func (t target) prepare(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (opts *launcherpb.SyncOptions, waiting bool, err error) {
	key := informer.Key(vmi)
	if t.opts.Images != nil {
		if err := t.opts.Images.PullFor(ctx, vmi); err != nil {
			var w *imagepull.Wait
			if errors.As(err, &w) {
				return nil, true, nil
			}
			return nil, false, t.fail(ctx, vmi, "preparing the target: "+err.Error())
		}
	}
	opts, err = t.opts.Disks.PrepareIncoming(ctx, vmi, rec)
	if err != nil {
		var pe *disks.Error
		if errors.As(err, &pe) {
			return nil, false, t.fail(ctx, vmi, "preparing the target: "+err.Error())
		}
		return nil, false, fmt.Errorf("preparing the migration target of %s: %w", key, err)
	}
	opts.Kvm, opts.DomainName, opts.NodeFailurePolicy = t.opts.KVM(), rec.DomainName, rec.NodeFailurePolicy
	return opts, false, nil
}

// ready publishes that this node receives, with the receiving domain's
// XML (once: the ready time stays the first one). Where it receives is
// the server's to say (the handoff's destination, from this node's
// registration): the API refuses a node's change of it.
func (t target) ready(ms *launcherpb.MigrationStatus) vmistatus.Mutate {
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		m := st.MigrationState
		if m == nil || m.Completed || m.StartTimestamp != nil {
			return
		}
		if m.TargetDomainXml == "" {
			m.TargetDomainXml = ms.GetDomainXml()
		}
		if m.TargetReadyTimestamp == nil {
			m.TargetReadyTimestamp = apiv1.Timestamp(now)
		}
	}
}

// fail ends a migration the source has not started because this node
// cannot receive it.
func (t target) fail(ctx context.Context, vmi *apiv1.VirtualMachineInstance, reason string) error {
	t.log.Warn("migration target failed", "vmi", informer.Key(vmi), "reason", reason)
	return t.opts.Status.Report(ctx, vmi, func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		m := st.MigrationState
		if m == nil || m.Completed || m.StartTimestamp != nil {
			return
		}
		m.Completed, m.Failed, m.FailureReason = true, true, reason
		m.EndTimestamp = apiv1.Timestamp(now)
	})
}

// failed removes the receiving domain, launcher and files of a migration
// that failed, the blank volumes made for it included.
func (t target) failed(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	rec, err := t.opts.Records.Record(key)
	if err != nil || rec == nil || rec.UID != vmi.GetMetadata().GetUid() || rec.IncomingMigration == "" {
		return controller.Result{}, err
	}
	res, err := t.opts.Handler.RemoveLocal(ctx, rec)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	if rec.IncomingPrepared != "" && rec.VMUID != "" {
		if err := t.opts.Layout.RemoveVMDir(rec.VMUID); err != nil {
			return controller.Result{}, fmt.Errorf("removing the volumes made for the migration of %s: %w", key, err)
		}
	}
	t.log.Info("migration failed; the target's domain and files removed", "vmi", key,
		"migration_uid", vmi.GetStatus().GetMigrationState().GetMigrationUid())
	return controller.Result{}, nil
}
