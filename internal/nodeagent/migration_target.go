package nodeagent

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
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// incomingRoom is what the target needs of package disks.
type incomingRoom interface {
	PrepareIncoming(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error)
}

// migrateIn is the target's part while the migration runs: prepare the
// files once, have the launcher define the receiving domain, publish
// where this node receives, and renew the receiving domain on every pass
// (it is removed when the renewals stop: an agent that died cannot own
// the guest afterwards).
func (a *Agent) migrateIn(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	key := informer.Key(vmi)
	st := vmi.GetStatus().GetMigrationState()
	uid := st.GetMigrationUid()
	if a.opts.Migration.Address == "" {
		return controller.Result{}, a.failIncoming(ctx, vmi, fmt.Sprintf("node %s takes no migrations: its agent has no --migration-address", a.opts.NodeName))
	}
	rec, err := a.recordFor(key)
	if err != nil {
		return controller.Result{}, err
	}
	if rec != nil && rec.UID != vmi.GetMetadata().GetUid() {
		// An older instance of the same name still has a domain here.
		return controller.Result{}, a.failIncoming(ctx, vmi, fmt.Sprintf("node %s still holds an earlier instance of %s", a.opts.NodeName, key))
	}
	if rec != nil && rec.MigratedAway != "" {
		// Coming back before this node removed what an earlier migration
		// away left: remove it first (its volumes are the other node's).
		res, err := a.removeLocal(ctx, rec)
		if err != nil {
			return controller.Result{}, err
		}
		return controller.Result{RequeueAfter: max(res.RequeueAfter, a.opts.Timing.MigrationPoll)}, nil
	}
	if rec == nil {
		if rec, err = a.newRecord(vmi); err != nil {
			return controller.Result{}, fmt.Errorf("recording %s: %w", key, err)
		}
		rec.IncomingMigration = uid
		if err := a.db.PutVMI(rec); err != nil {
			return controller.Result{}, fmt.Errorf("saving state record of %s: %w", key, err)
		}
	}
	if st.GetStartTimestamp() == nil && st.GetAbortRequested() {
		return controller.Result{RequeueAfter: a.opts.Timing.MigrationPoll}, nil // the source ends it
	}

	var opts *launcherpb.SyncOptions
	if rec.IncomingPrepared != uid {
		if err := a.pullImages(ctx, vmi); err != nil {
			var w *pullWait
			if errors.As(err, &w) {
				return controller.Result{RequeueAfter: 2 * time.Second}, nil
			}
			return controller.Result{}, a.failIncoming(ctx, vmi, "preparing the target: "+err.Error())
		}
		in, ok := a.disks.(incomingRoom)
		if !ok {
			return controller.Result{}, errors.New("the disk room cannot prepare migration targets")
		}
		if opts, err = in.PrepareIncoming(ctx, vmi, rec); err != nil {
			var pe *disks.Error
			if errors.As(err, &pe) {
				return controller.Result{}, a.failIncoming(ctx, vmi, "preparing the target: "+err.Error())
			}
			return controller.Result{}, fmt.Errorf("preparing the migration target of %s: %w", key, err)
		}
		opts.Kvm, opts.DomainName, opts.NodeFailurePolicy = a.host.KVMUsable, rec.DomainName, rec.NodeFailurePolicy
	}
	e, err := a.ensureLauncher(ctx, vmi, rec)
	if err != nil {
		return controller.Result{}, fmt.Errorf("launcher for the migration target of %s: %w", key, err)
	}
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
	defer cancel()
	ms, err := e.client.Incoming(cctx, uid, a.vmiForTarget(vmi), opts, a.opts.Timing.IncomingLease)
	if err != nil {
		if rec.IncomingPrepared == uid || unavailable(err) {
			return controller.Result{}, fmt.Errorf("renewing the migration target of %s: %w", key, err)
		}
		return controller.Result{}, a.failIncoming(ctx, vmi, "defining the receiving domain: "+errorMessage(err))
	}
	if rec.IncomingPrepared != uid {
		next := *rec
		next.IncomingPrepared = uid
		if err := a.db.PutVMI(&next); err != nil {
			return controller.Result{}, fmt.Errorf("saving state record of %s: %w", key, err)
		}
		*rec = next
		a.log.Info("migration target ready", "vmi", key, "migration_uid", uid, "source", st.GetSourceNode())
	}
	if err := a.persistHandle(rec, e); err != nil {
		return controller.Result{}, err
	}
	if _, err := a.writeStatus(ctx, vmi, a.targetReady(ms)); err != nil && !errors.Is(err, errVMIGone) {
		return controller.Result{}, err
	}
	return controller.Result{RequeueAfter: a.opts.Timing.MigrationPoll}, nil
}

// targetReady publishes where this node receives and the receiving
// domain's XML (once: the ready time stays the first one).
func (a *Agent) targetReady(ms *launcherpb.MigrationStatus) func(*apiv1.VirtualMachineInstanceStatus, time.Time) {
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		m := st.MigrationState
		if m == nil || m.Completed || m.StartTimestamp != nil {
			return
		}
		m.TargetLibvirtUri = a.opts.Migration.LibvirtURI
		m.TargetNodeAddress = a.opts.Migration.Address
		if m.TargetDomainXml == "" {
			m.TargetDomainXml = ms.GetDomainXml()
		}
		if m.TargetReadyTimestamp == nil {
			m.TargetReadyTimestamp = apiv1.Timestamp(now)
		}
	}
}

// failIncoming ends a migration the source has not started because this
// node cannot receive it.
func (a *Agent) failIncoming(ctx context.Context, vmi *apiv1.VirtualMachineInstance, reason string) error {
	a.log.Warn("migration target failed", "vmi", informer.Key(vmi), "reason", reason)
	_, err := a.writeStatus(ctx, vmi, func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		m := st.MigrationState
		if m == nil || m.Completed || m.StartTimestamp != nil {
			return
		}
		m.Completed, m.Failed, m.FailureReason = true, true, reason
		m.EndTimestamp = apiv1.Timestamp(now)
	})
	if errors.Is(err, errVMIGone) {
		return nil
	}
	return err
}

// incomingFailed removes the receiving domain, launcher and files of a
// migration that failed, the blank volumes made for it included.
func (a *Agent) incomingFailed(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	rec, err := a.recordFor(key)
	if err != nil || rec == nil || rec.UID != vmi.GetMetadata().GetUid() || rec.IncomingMigration == "" {
		return controller.Result{}, err
	}
	res, err := a.removeLocal(ctx, rec)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	if rec.IncomingPrepared != "" && rec.VMUID != "" {
		if err := a.layout.RemoveVMDir(rec.VMUID); err != nil {
			return controller.Result{}, fmt.Errorf("removing the volumes made for the migration of %s: %w", key, err)
		}
	}
	a.log.Info("migration failed; the target's domain and files removed", "vmi", key,
		"migration_uid", vmi.GetStatus().GetMigrationState().GetMigrationUid())
	return controller.Result{}, nil
}
