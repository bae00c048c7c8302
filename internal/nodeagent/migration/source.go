package migration

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
)

// source is the role of the node an instance runs on.
type source struct{ *Roles }

// migrate is the source's part: start libvirt's job once the target is
// ready, follow it, abort it on request, and record how it ended. Until
// the job starts the guest is handled as usual (it runs here).
func (s source) migrate(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	key := informer.Key(vmi)
	st := vmi.GetStatus().GetMigrationState()
	poll := controller.Result{RequeueAfter: s.opts.Poll}
	rec, err := s.opts.Records.Record(key)
	if err != nil {
		return controller.Result{}, err
	}
	if rec == nil || rec.UID != vmi.GetMetadata().GetUid() {
		return controller.Result{}, s.end(ctx, vmi, "the source node has no domain for this instance", "")
	}
	e, err := s.opts.Launchers.Ensure(ctx, vmi, rec)
	if err != nil {
		if launchers.Unavailable(err) {
			return s.opts.Handler.Unreachable(ctx, key, vmi, e, err)
		}
		return controller.Result{}, err
	}

	var ms *launcherpb.MigrationStatus
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	if st.GetStartTimestamp() == nil {
		switch {
		case st.GetAbortRequested():
			return controller.Result{}, s.end(ctx, vmi, "the migration was canceled before it started", apiv1.MigrationAbortSucceeded)
		case !targetReady(st):
			return poll, nil // Pass leaves the guest to the usual handling
		}
		if reason := refusedDestination(st); reason != "" {
			return controller.Result{}, s.end(ctx, vmi, reason, "")
		}
		ms, err = e.Client.Migrate(cctx, migrateRequest(st))
		if c := status.Code(err); c == codes.FailedPrecondition || c == codes.InvalidArgument {
			return controller.Result{}, s.end(ctx, vmi, "the migration could not start: "+launchers.ErrorMessage(err), "")
		}
	} else {
		ms, err = e.Client.GetMigration(cctx)
		if err == nil && ms.GetMigrationUid() != st.GetMigrationUid() {
			// The launcher has no record of the job it started: it was
			// never started (the launcher died before libvirt's job), so
			// it is started now, once.
			if reason := refusedDestination(st); reason != "" {
				return controller.Result{}, s.end(ctx, vmi, reason, "")
			}
			ms, err = e.Client.Migrate(cctx, migrateRequest(st))
		}
	}
	if err != nil {
		if launchers.Unavailable(err) {
			return s.opts.Handler.Unreachable(ctx, key, vmi, e, err)
		}
		return controller.Result{}, fmt.Errorf("migrating %s: %w", key, err)
	}
	if ms.GetCompleted() && !ms.GetFailed() && rec.MigratedAway != st.GetMigrationUid() {
		// Noted before the instance is handed over: whichever pass then
		// removes this node's copy removes the volumes too.
		next := *rec
		next.MigratedAway = st.GetMigrationUid()
		if err := s.putRecord(rec, &next); err != nil {
			return controller.Result{}, fmt.Errorf("saving state record of %s: %w", key, err)
		}
	}
	if st.GetAbortRequested() && ms.GetRunning() && ms.GetAbortStatus() == "" {
		if ms, err = e.Client.AbortMigration(cctx); err != nil {
			return controller.Result{}, fmt.Errorf("aborting the migration of %s: %w", key, err)
		}
		s.log.Info("aborting migration", "vmi", key, "migration_uid", st.GetMigrationUid())
	}
	if err := s.opts.Status.Report(ctx, vmi, sourceProgress(ms)); err != nil {
		return controller.Result{}, err
	}
	switch {
	case ms.GetRunning():
		return poll, nil
	case ms.GetFailed():
		s.log.Warn("migration failed; the guest stays here", "vmi", key, "migration_uid", st.GetMigrationUid(), "reason", ms.GetFailureReason())
		// The domain runs here still; the next pass handles it as usual.
		return poll, nil
	}
	s.log.Info("migration completed; instance handed to the target", "vmi", key, "target", st.GetTargetNode(),
		"downtime_ms", ms.GetProgress().GetDowntimeMs(), "elapsed_ms", ms.GetProgress().GetElapsedMs())
	return controller.Result{}, nil
}

// refusedDestination says why the source will not start the migration
// to the destination its state names, or "". The controller built it from
// the target's registration and no node may change it; a destination that
// reached the store some other way (written into etcd, data from before
// the rule) would have this host's libvirtd open whatever URI it names,
// as root.
func refusedDestination(st *apiv1.MigrationState) string {
	uri, addr := st.GetTargetLibvirtUri(), st.GetTargetNodeAddress()
	if err := migrationdest.Validate(uri, addr); err != nil {
		return fmt.Sprintf("the migration could not start: the destination %q (address %q) is refused: %v", uri, addr, err)
	}
	return ""
}

// migrateRequest asks the launcher for libvirt's job to the target the
// migration state names.
func migrateRequest(st *apiv1.MigrationState) *launcherpb.MigrateRequest {
	return &launcherpb.MigrateRequest{
		MigrationUid:     st.GetMigrationUid(),
		TargetLibvirtUri: st.GetTargetLibvirtUri(),
		TargetAddress:    st.GetTargetNodeAddress(),
		Configuration:    st.GetConfiguration(),
		DestXml:          st.GetTargetDomainXml(),
	}
}

// sourceProgress mirrors the launcher's migration record into the
// instance's state; a completed migration hands the instance to the
// target in the same write.
func sourceProgress(ms *launcherpb.MigrationStatus) func(*apiv1.VirtualMachineInstanceStatus, time.Time) {
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		m := st.MigrationState
		if m == nil {
			return
		}
		if ms.GetStartUnixMillis() > 0 {
			m.StartTimestamp = apiv1.Timestamp(time.UnixMilli(ms.GetStartUnixMillis()))
		} else if m.StartTimestamp == nil {
			m.StartTimestamp = apiv1.Timestamp(now)
		}
		if ms.GetMode() != "" {
			m.Mode = ms.GetMode()
		}
		m.AbortStatus = ms.GetAbortStatus()
		if p := ms.GetProgress(); p != nil {
			m.Progress = p
		}
		if !ms.GetCompleted() {
			return
		}
		m.Completed, m.Failed, m.FailureReason = true, ms.GetFailed(), ms.GetFailureReason()
		m.EndTimestamp = apiv1.Timestamp(now)
		if ms.GetEndUnixMillis() > 0 {
			m.EndTimestamp = apiv1.Timestamp(time.UnixMilli(ms.GetEndUnixMillis()))
		}
		m.TargetDomainXml = ""
		if !ms.GetFailed() {
			st.NodeName = m.TargetNode
		}
	}
}

// end records on the instance that its migration ended without libvirt's
// job having run (abortStatus set when that was asked for).
func (s source) end(ctx context.Context, vmi *apiv1.VirtualMachineInstance, reason, abortStatus string) error {
	err := s.opts.Status.Report(ctx, vmi, func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		m := st.MigrationState
		if m == nil || m.Completed {
			return
		}
		m.Completed, m.Failed, m.FailureReason, m.AbortStatus = true, true, reason, abortStatus
		m.EndTimestamp = apiv1.Timestamp(now)
		m.TargetDomainXml = ""
	})
	if err != nil {
		return err
	}
	s.log.Info("migration ended before it started", "vmi", informer.Key(vmi), "reason", reason)
	return nil
}

// migratedAway removes what is left here of an instance that runs on
// another node now: its stopped domain, launcher and files. Its VM's
// volumes go too when a migration copied them to where it runs.
func (s source) migratedAway(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance) (controller.Result, error) {
	rec, err := s.opts.Records.Record(key)
	if err != nil || rec == nil || rec.UID != vmi.GetMetadata().GetUid() {
		return controller.Result{}, err
	}
	res, err := s.opts.Handler.RemoveLocal(ctx, rec)
	if err != nil || res.RequeueAfter > 0 {
		return res, err
	}
	s.log.Info("instance migrated away; local copy removed", "vmi", key, "now_on", vmi.GetStatus().GetNodeName(),
		"migration_uid", vmi.GetStatus().GetMigrationState().GetMigrationUid())
	return controller.Result{}, nil
}

// targetReady reports a migration whose target published where it
// receives.
func targetReady(st *apiv1.MigrationState) bool {
	return st.GetTargetReadyTimestamp() != nil && st.GetTargetDomainXml() != ""
}

// sourceActs reports whether the source's migration work takes over the
// instance from the usual handling: once the job may start (the target
// is ready), has started, or must be canceled.
func sourceActs(st *apiv1.MigrationState) bool {
	return st.GetStartTimestamp() != nil || st.GetAbortRequested() || targetReady(st)
}
