package driver

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	"libvirt.org/go/libvirtxml"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// Migration roles, as recorded in the domain metadata and reported.
const (
	RoleSource = "source"
	RoleTarget = "target"
)

// MigratingDomain is what a live migration needs of a libvirt domain
// (launcher/internal/virt implements it; tests use a fake).
type MigratingDomain interface {
	// Migrate runs libvirt's job and blocks until it ends.
	Migrate(p MigrateParams) error
	// JobStats reads the running job, or the last completed one.
	JobStats(completed bool) (JobStats, error)
	AbortJob() error
	SetMaxDowntime(ms uint64) error
	StartPostCopy() error
	// MigratableXML is the persistent definition as libvirt would send it
	// (VIR_DOMAIN_XML_MIGRATABLE).
	MigratableXML() (string, error)
}

// MigrateParams are libvirt's migration parameters.
type MigrateParams struct {
	TargetURI string
	Address   string
	// DestXML is the domain the target starts; PersistXML its persistent
	// definition there (the target's own, firmware by feature).
	DestXML    string
	PersistXML string
	CopyDisks  []string
	// SharedFiles: file disks on a shared filesystem stay where they are.
	// libvirt 9.0 takes a path for shared only on the filesystems it
	// knows (NFS, CephFS, GlusterFS, ...) and refuses the rest as
	// "unsafe"; virtplane vouches for a class's path (opened with
	// cache=none) and says so (VIR_MIGRATE_UNSAFE).
	SharedFiles  bool
	BandwidthMiB uint64
	AutoConverge bool
	PostCopy     bool
	TLS          bool
}

// JobStats is libvirt's domain job information, in the units it uses.
type JobStats struct {
	Active, Completed, Failed, Cancelled bool

	DataTotal, DataProcessed, DataRemaining, MemBps uint64
	DiskTotal, DiskProcessed                        uint64
	DowntimeMs, ElapsedMs                           uint64
}

// migrations holds the driver's one migration record (a launcher serves
// one domain, which migrates at most once at a time).
type migrations struct {
	mu  sync.Mutex
	cur *migration // guarded by mu
}

type migration struct {
	st *launcherpb.MigrationStatus
	// abort is closed when an abort was requested.
	abort     chan struct{}
	abortOnce sync.Once
	done      chan struct{}
}

func (m *migration) snapshot() *launcherpb.MigrationStatus {
	return proto.Clone(m.st).(*launcherpb.MigrationStatus)
}

// Migrate starts a live migration of the domain to the target and returns
// at once; GetMigration follows it. Calling it again with the same uid
// reports that migration (a node agent that restarted asks again); a uid
// that already ran is never run twice.
func (d *Driver) Migrate(ctx context.Context, req *launcherpb.MigrateRequest) (*launcherpb.MigrationStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	uid := req.GetMigrationUid()
	switch {
	case uid == "":
		return nil, status.Error(codes.InvalidArgument, "migrate: migration_uid is required")
	case req.GetDestXml() == "":
		// The target runs with its own paths: never the source's XML.
		return nil, status.Error(codes.InvalidArgument, "migrate: dest_xml (the target's domain definition) is required")
	}
	// This host's libvirtd opens the URI as root (peer-to-peer): a qemu+ext
	// URI would run its command here. The node agent checked it already;
	// checked again for a request that did not come that way.
	if err := migrationdest.Validate(req.GetTargetLibvirtUri(), req.GetTargetAddress()); err != nil {
		// Worded as the node agent's own refusal (the migration's failure
		// reason reads the same whichever of the two stopped it).
		return nil, status.Errorf(codes.InvalidArgument, "migrate: target_libvirt_uri: the destination %q (address %q) is refused: %v",
			req.GetTargetLibvirtUri(), req.GetTargetAddress(), err)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	d.migs.mu.Lock()
	cur := d.migs.cur
	d.migs.mu.Unlock()
	if cur != nil && cur.st.GetMigrationUid() == uid {
		return d.GetMigration(ctx, nil)
	}
	if cur != nil && cur.st.GetRunning() {
		return nil, status.Errorf(codes.FailedPrecondition, "migrate: migration %s is still running", cur.st.GetMigrationUid())
	}

	dom, err := d.lookup()
	if err != nil {
		return nil, err
	}
	if dom == nil {
		return nil, status.Errorf(codes.FailedPrecondition, "migrate: domain %s does not exist", d.cfg.DomainName)
	}
	md, err := d.owned(dom)
	if err != nil {
		dom.Free()
		return nil, err
	}
	if rec := md.Migration; rec != nil && rec.UID == uid {
		dom.Free()
		// A restarted launcher: that uid ran already.
		return d.GetMigration(ctx, nil)
	}
	mdom, ok := dom.(MigratingDomain)
	if !ok {
		dom.Free()
		return nil, status.Error(codes.Unimplemented, "migrate: this libvirt domain cannot migrate")
	}
	st, _, err := dom.GetState()
	if err != nil {
		dom.Free()
		return nil, grpcError(fmt.Errorf("get domain state: %w", err))
	}
	if !st.Active() {
		dom.Free()
		return nil, status.Errorf(codes.FailedPrecondition, "migrate: domain %s is %s, not running", d.cfg.DomainName, st)
	}

	copyDisks, dataBytes := req.GetCopyDisks(), req.GetDataBytes()
	x, err := dom.GetXMLDesc()
	if err != nil {
		dom.Free()
		return nil, grpcError(fmt.Errorf("read the domain XML: %w", err))
	}
	local, size, shared, err := localDisks(x)
	if err != nil {
		dom.Free()
		return nil, status.Errorf(codes.Internal, "migrate: %v", err)
	}
	// An EFI guest's destination carries the firmware libvirt resolved
	// here; one that cannot is refused before libvirt sees it (libvirt 9.0
	// crashes the target's libvirtd on an EFI domain without a loader).
	destXML, err := domxml.DestinationXML(req.GetDestXml(), x)
	if err != nil {
		dom.Free()
		return nil, status.Errorf(codes.InvalidArgument, "migrate: dest_xml: %v", err)
	}
	if len(copyDisks) == 0 {
		copyDisks = local
	}
	if dataBytes <= 0 {
		dataBytes = size
	}

	now := d.cfg.Now()
	md.Migration = &domxml.MigrationRecord{UID: uid, Role: RoleSource, Start: now.UnixMilli(), Mode: apiv1.MigrationModePreCopy}
	if err := writeMetadata(dom, md); err != nil {
		dom.Free()
		return nil, grpcError(err)
	}
	m := &migration{
		st: &launcherpb.MigrationStatus{
			MigrationUid: uid, Role: RoleSource, Running: true,
			Mode: apiv1.MigrationModePreCopy, StartUnixMillis: now.UnixMilli(),
		},
		abort: make(chan struct{}),
		done:  make(chan struct{}),
	}
	d.migs.mu.Lock()
	d.migs.cur = m
	d.migs.mu.Unlock()

	cfg := req.GetConfiguration()
	params := MigrateParams{
		TargetURI:    req.GetTargetLibvirtUri(),
		Address:      req.GetTargetAddress(),
		DestXML:      destXML,
		PersistXML:   req.GetDestXml(),
		CopyDisks:    copyDisks,
		SharedFiles:  shared,
		BandwidthMiB: uint64(max(cfg.GetBandwidthMibPerSecond(), 0)),
		AutoConverge: cfg.GetAllowAutoConverge(),
		PostCopy:     cfg.GetAllowPostCopy(),
		TLS:          cfg.GetTls(),
	}
	d.log.Info("starting live migration", "migration_uid", uid, "target", req.GetTargetLibvirtUri(),
		"address", req.GetTargetAddress(), "copy_disks", copyDisks, "data_mib", dataBytes>>20, "bandwidth_mib", params.BandwidthMiB)
	// Snapshot before the goroutines write to it.
	first := m.snapshot()
	d.wg.Add(2)
	go d.runMigration(dom, mdom, m, params)
	go d.monitorMigration(mdom, m, cfg, dataBytes)
	return first, nil
}

// runMigration runs libvirt's job and records its outcome; it owns dom.
func (d *Driver) runMigration(dom Domain, mdom MigratingDomain, m *migration, p MigrateParams) {
	defer d.wg.Done()
	defer dom.Free()
	err := mdom.Migrate(p)
	end := d.cfg.Now()

	var final JobStats
	if err == nil {
		// The source keeps the completed job's statistics (downtime).
		if js, jerr := mdom.JobStats(true); jerr == nil {
			final = js
		}
	}
	d.migs.mu.Lock()
	st := m.st
	// Aborting marks an abort someone asked for; a timeout's abort only
	// leaves its reason.
	aborted := st.GetAbortStatus() == apiv1.MigrationAbortAborting
	st.Running, st.Completed, st.EndUnixMillis = false, true, end.UnixMilli()
	if err != nil {
		st.Failed = true
		if st.FailureReason == "" {
			st.FailureReason = err.Error()
		}
		if aborted {
			st.AbortStatus = apiv1.MigrationAbortSucceeded
			st.FailureReason = "Live migration has been aborted: " + st.FailureReason
		}
	} else {
		if aborted {
			// Too late: the job had already switched over.
			st.AbortStatus = apiv1.MigrationAbortFailed
		}
		if final.Completed || final.DowntimeMs > 0 {
			st.Progress = progressOf(final, end)
		}
	}
	rec := &domxml.MigrationRecord{
		UID: st.GetMigrationUid(), Role: RoleSource, Start: st.GetStartUnixMillis(), End: st.GetEndUnixMillis(),
		Failed: st.GetFailed(), Reason: st.GetFailureReason(), Mode: st.GetMode(), AbortStatus: st.GetAbortStatus(),
	}
	d.migs.mu.Unlock()
	close(m.done)

	if err != nil {
		d.log.Warn("live migration failed", "migration_uid", rec.UID, "err", err, "aborted", aborted)
	} else {
		d.log.Info("live migration completed", "migration_uid", rec.UID,
			"elapsed_ms", final.ElapsedMs, "downtime_ms", final.DowntimeMs)
	}
	// The outcome goes into the metadata (the domain is inactive now on
	// success, so only its persistent definition is written).
	if md, ok, merr := readMetadata(dom); merr == nil && ok {
		md.Migration = rec
		if werr := writeMetadata(dom, md); werr != nil {
			d.log.Warn("recording the migration outcome in the domain metadata", "err", werr)
		}
	}
	if cs, serr := d.currentStatus(); serr == nil {
		d.publish(cs, "Migration/"+outcomeName(rec))
	}
}

func outcomeName(rec *domxml.MigrationRecord) string {
	if rec.Failed {
		return "Failed"
	}
	return "Completed"
}

// GetMigration reports the launcher's migration: the one it runs or ran,
// or, after a launcher restart, what the domain metadata and libvirt say.
func (d *Driver) GetMigration(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.MigrationStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	d.migs.mu.Lock()
	cur := d.migs.cur
	var snap *launcherpb.MigrationStatus
	if cur != nil {
		snap = cur.snapshot()
	}
	d.migs.mu.Unlock()
	if snap != nil {
		return snap, nil // only a source keeps one in memory
	}
	dom, err := d.lookup()
	if err != nil {
		return nil, err
	}
	if dom == nil {
		return &launcherpb.MigrationStatus{}, nil
	}
	defer dom.Free()
	md, ok, err := readMetadata(dom)
	if err != nil {
		return nil, grpcError(err)
	}
	if !ok || md.Migration == nil {
		return &launcherpb.MigrationStatus{}, nil
	}
	return d.recordedMigration(dom, md.Migration)
}

// recordedMigration turns a metadata record into a status, deciding an
// unfinished one from libvirt's state: never a guess.
func (d *Driver) recordedMigration(dom Domain, rec *domxml.MigrationRecord) (*launcherpb.MigrationStatus, error) {
	st := &launcherpb.MigrationStatus{
		MigrationUid: rec.UID, Role: rec.Role, Mode: rec.Mode, AbortStatus: rec.AbortStatus,
		StartUnixMillis: rec.Start, EndUnixMillis: rec.End,
		Completed: rec.End != 0, Failed: rec.Failed, FailureReason: rec.Reason,
	}
	if st.Completed {
		return st, nil
	}
	state, reason, err := dom.GetState()
	if err != nil {
		return nil, grpcError(fmt.Errorf("get domain state: %w", err))
	}
	switch rec.Role {
	case RoleTarget:
		// The incoming domain is paused (reason Migration) while the
		// stream arrives and runs once the source switched over.
		switch {
		case state == StatePaused && ReasonName(state, reason) == "Migration":
			st.Running = true
		case state.Active():
			st.Completed = true
		default:
			st.Running = true // defined, waiting for the source
		}
		return st, nil
	}
	// Source: a job still running belongs to us; a domain that stopped
	// because it migrated succeeded; an active domain without a job failed.
	if mdom, ok := dom.(MigratingDomain); ok {
		if js, err := mdom.JobStats(false); err == nil && js.Active {
			st.Running = true
			st.Progress = progressOf(js, d.cfg.Now())
			return st, nil
		}
	}
	st.Completed = true
	if state == StateShutoff && ReasonName(state, reason) == "Migrated" {
		return st, nil
	}
	st.Failed = true
	st.FailureReason = fmt.Sprintf("libvirt's migration job is gone and the domain is %s (%s)", state, ReasonName(state, reason))
	return st, nil
}

// AbortMigration asks libvirt to abort the running migration job. The
// outcome (abort Succeeded, or Failed when the job had already switched
// over) is reported by GetMigration once the job ends.
func (d *Driver) AbortMigration(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.MigrationStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	d.migs.mu.Lock()
	cur := d.migs.cur
	d.migs.mu.Unlock()
	if cur == nil || cur.st.GetRole() != RoleSource {
		return nil, status.Error(codes.FailedPrecondition, "abort migration: this launcher runs no outgoing migration")
	}
	if err := d.abortMigration(cur, ""); err != nil {
		return nil, err
	}
	return d.GetMigration(ctx, nil)
}

// abortMigration marks the migration aborting and aborts libvirt's job;
// reason, when set, is why (a timeout) rather than a request.
func (d *Driver) abortMigration(m *migration, reason string) error {
	d.migs.mu.Lock()
	if !m.st.GetRunning() {
		d.migs.mu.Unlock()
		return nil
	}
	if reason == "" {
		m.st.AbortStatus = apiv1.MigrationAbortAborting
	} else {
		m.st.FailureReason = reason
	}
	d.migs.mu.Unlock()
	m.abortOnce.Do(func() { close(m.abort) })

	dom, err := d.lookup()
	if err != nil {
		return err
	}
	if dom == nil {
		return nil
	}
	defer dom.Free()
	mdom, ok := dom.(MigratingDomain)
	if !ok {
		return status.Error(codes.Unimplemented, "abort migration: this libvirt domain cannot migrate")
	}
	if err := mdom.AbortJob(); err != nil {
		// The job may have ended between the check and the abort; the
		// outcome is reported from the job's end either way.
		d.log.Warn("aborting the migration job", "err", err)
	}
	d.log.Info("aborting live migration", "migration_uid", m.st.GetMigrationUid(), "reason", reason)
	return nil
}

// progressOf converts libvirt's job statistics.
func progressOf(js JobStats, now time.Time) *apiv1.MigrationProgress {
	return &apiv1.MigrationProgress{
		DataTotalBytes:       int64(js.DataTotal),
		DataProcessedBytes:   int64(js.DataProcessed),
		DataRemainingBytes:   int64(js.DataRemaining),
		MemoryBytesPerSecond: int64(js.MemBps),
		DiskTotalBytes:       int64(js.DiskTotal),
		DiskProcessedBytes:   int64(js.DiskProcessed),
		DowntimeMs:           int64(js.DowntimeMs),
		ElapsedMs:            int64(js.ElapsedMs),
		UpdateTime:           apiv1.Timestamp(now),
	}
}

// localDisks reads a live domain XML: the writable disks backed by a file
// (node-local in virtplane: copied by a migration) and the bytes a
// migration moves, the guest memory plus those files' sizes.
func localDisks(x string) (disks []string, size int64, sharedFiles bool, err error) {
	var def libvirtxml.Domain
	if err := def.Unmarshal(x); err != nil {
		return nil, 0, false, fmt.Errorf("parse the domain XML: %w", err)
	}
	if m := def.Memory; m != nil {
		size = int64(m.Value) * unitBytes(m.Unit)
	}
	if def.Devices == nil {
		return nil, size, false, nil
	}
	// Files on a shared filesystem stay where they are, as network (RBD)
	// disks do: the destination opens the same ones.
	shared := map[string]bool{}
	if def.Metadata != nil {
		if md, err := domxml.ParseMetadata(def.Metadata.XML); err == nil {
			for _, name := range md.SharedDisks {
				shared[domxml.DiskAlias(name)] = true
			}
		}
	}
	for _, disk := range def.Devices.Disks {
		if disk.Device != "disk" || disk.ReadOnly != nil || disk.Source == nil || disk.Source.File == nil || disk.Target == nil {
			continue
		}
		if disk.Alias != nil && shared[disk.Alias.Name] {
			sharedFiles = true
			continue
		}
		disks = append(disks, disk.Target.Dev)
		if fi, err := os.Stat(disk.Source.File.File); err == nil {
			size += fi.Size()
		}
	}
	return disks, size, sharedFiles, nil
}

// unitBytes is libvirt's memory unit in bytes (KiB when none).
func unitBytes(unit string) int64 {
	switch unit {
	case "b", "bytes":
		return 1
	case "", "k", "KiB":
		return 1 << 10
	case "M", "MiB":
		return 1 << 20
	case "G", "GiB":
		return 1 << 30
	case "KB":
		return 1000
	case "MB":
		return 1000 * 1000
	case "GB":
		return 1000 * 1000 * 1000
	}
	return 1 << 10
}
