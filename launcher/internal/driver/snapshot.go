package driver

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// Online snapshots (docs/snapshots.md, "Snapshot flow" step 3): the node
// agent asks for an external disk-only snapshot of the persistent volumes
// (QEMU then writes to overlays and the volume files stand still), copies
// the files, and asks for the overlays to be committed back.

// SnapshottingDomain is what an online snapshot needs of a libvirt domain
// (launcher/internal/virt implements it; tests use a fake).
type SnapshottingDomain interface {
	// FSFreeze freezes the guest's file systems through its guest agent;
	// ErrNoGuestAgent when no agent answers.
	FSFreeze() error
	FSThaw() error
	// CreateDiskSnapshot takes the external disk-only snapshot snap
	// describes, atomically and without libvirt metadata.
	CreateDiskSnapshot(snap *libvirtxml.DomainSnapshot) error
	// BlockCommitActive starts the active commit of disk's top layer into
	// the layer below it (shallow).
	BlockCommitActive(disk string) error
	// BlockJob reads disk's block job; ok is false when there is none.
	BlockJob(disk string) (job BlockJobInfo, ok bool, err error)
	// PivotBlockJob ends disk's ready active commit by switching the disk
	// to the layer committed into; it returns once that is done.
	PivotBlockJob(disk string) error
}

// BlockJobInfo is libvirt's virDomainBlockJobInfo. libvirt reports
// Cur == End only once the job is ready (qemuBlockJobInfoTranslate), so
// that is when an active commit can pivot.
type BlockJobInfo struct {
	Commit   bool // an (active) commit job, not a copy or pull
	Cur, End uint64
}

// Ready reports whether the job can pivot. 0 of 0 is a job QEMU has not
// started to report on yet (libvirt reports 1 of 1 for an empty one once
// ready).
func (j BlockJobInfo) Ready() bool { return j.End > 0 && j.Cur == j.End }

// ErrJobNotReady: libvirt has not yet taken the block job for ready (its
// READY event is still on the way) and refuses the pivot; poll again.
var ErrJobNotReady = errors.New("block job not ready for pivot yet")

// ErrNoGuestAgent: the guest agent is not configured, not connected or
// does not answer; the snapshot goes on without a freeze.
var ErrNoGuestAgent = errors.New("guest agent not available")

// ErrMigrating is KubeVirt's refusal of a freeze during a migration.
const ErrMigrating = "failed to freeze VMI, VMI is currently during migration"

// blockJobPoll is how often a commit is looked at while it catches up.
const blockJobPoll = 50 * time.Millisecond

// snapshotDisks checks the disks of a request: each overlay lies beside
// its volume and is named after it, so that CommitDisks, which removes
// overlays, can only ever remove such a file.
func snapshotDisks(op string, disks []*launcherpb.SnapshotDisk) error {
	if len(disks) == 0 {
		return status.Errorf(codes.InvalidArgument, "%s: no disks", op)
	}
	seen := map[string]bool{}
	for i, d := range disks {
		p, o := d.GetPath(), d.GetOverlayPath()
		switch {
		case !filepath.IsAbs(p) || filepath.Clean(p) != p:
			return status.Errorf(codes.InvalidArgument, "%s: disks[%d].path %q is not a clean absolute path", op, i, p)
		case filepath.Dir(o) != filepath.Dir(p) || !strings.HasPrefix(filepath.Base(o), filepath.Base(p)+".snap-") || filepath.Clean(o) != o:
			return status.Errorf(codes.InvalidArgument, "%s: disks[%d].overlay_path %q is not %s.snap-<id>", op, i, o, p)
		case seen[p]:
			return status.Errorf(codes.InvalidArgument, "%s: disks[%d].path %q is listed twice", op, i, p)
		}
		seen[p] = true
	}
	return nil
}

// onRunningDomain runs fn under the lock on the owned domain, which must
// be running, blocked or paused.
func (d *Driver) onRunningDomain(ctx context.Context, op string, fn func(dom Domain, sdom SnapshottingDomain, st State) error) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dom, err := d.lookup()
	if err != nil {
		return err
	}
	if dom == nil {
		return status.Errorf(codes.FailedPrecondition, "%s: domain %s does not exist", op, d.cfg.DomainName)
	}
	defer dom.Free()
	if _, err := d.owned(dom); err != nil {
		return err
	}
	st, _, live, err := liveMetadata(dom)
	if err != nil {
		return err
	}
	if !live {
		return status.Errorf(codes.FailedPrecondition, "%s: domain %s is %s, not running", op, d.cfg.DomainName, st)
	}
	sdom, ok := dom.(SnapshottingDomain)
	if !ok {
		return status.Errorf(codes.Unimplemented, "%s: this libvirt domain cannot take disk snapshots", op)
	}
	return fn(dom, sdom, st)
}

// liveDisks reads the running domain's disks: target device by source
// file.
func liveDisks(dom Domain) (map[string]string, []libvirtxml.DomainDisk, error) {
	x, err := dom.GetXMLDesc()
	if err != nil {
		return nil, nil, grpcError(fmt.Errorf("get domain XML: %w", err))
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(x); err != nil {
		return nil, nil, status.Errorf(codes.Internal, "parsing the domain XML: %v", err)
	}
	if def.Devices == nil {
		return map[string]string{}, nil, nil
	}
	bySource := map[string]string{}
	for _, disk := range def.Devices.Disks {
		if disk.Source != nil && disk.Source.File != nil && disk.Target != nil {
			bySource[disk.Source.File.File] = disk.Target.Dev
		}
	}
	return bySource, def.Devices.Disks, nil
}

// SnapshotDisks takes an external disk-only snapshot of exactly the
// disks asked for, every other disk left out, with the guest's file
// systems frozen around it when asked and a guest agent answers. A stale
// overlay file (from an attempt that failed before QEMU used it) is
// removed first. The guest is thawed whatever happens.
func (d *Driver) SnapshotDisks(ctx context.Context, req *launcherpb.SnapshotDisksRequest) (*launcherpb.SnapshotDisksResponse, error) {
	if err := snapshotDisks("snapshot disks", req.GetDisks()); err != nil {
		return nil, err
	}
	var out *launcherpb.SnapshotDisksResponse
	err := d.onRunningDomain(ctx, "snapshot disks", func(dom Domain, sdom SnapshottingDomain, st State) error {
		if d.migrating() {
			return status.Error(codes.FailedPrecondition, ErrMigrating)
		}
		bySource, all, err := liveDisks(dom)
		if err != nil {
			return err
		}
		want := map[string]string{} // target dev → overlay
		for _, disk := range req.GetDisks() {
			dev, ok := bySource[disk.GetPath()]
			if !ok {
				return status.Errorf(codes.FailedPrecondition, "snapshot disks: no disk of domain %s reads %s (an overlay left? commit first)", d.cfg.DomainName, disk.GetPath())
			}
			want[dev] = disk.GetOverlayPath()
			if err := os.Remove(disk.GetOverlayPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return status.Errorf(codes.Internal, "snapshot disks: removing a stale overlay: %v", err)
			}
		}
		snap := &libvirtxml.DomainSnapshot{
			Description: "virtplane volume snapshot",
			Disks:       &libvirtxml.DomainSnapshotDisks{},
		}
		for _, disk := range all {
			if disk.Target == nil || disk.Target.Dev == "" {
				continue
			}
			sd := libvirtxml.DomainSnapshotDisk{Name: disk.Target.Dev, Snapshot: "no"}
			if o, ok := want[disk.Target.Dev]; ok {
				// A file source: libvirt labels the new overlay for QEMU
				// as it labels the volume.
				sd = libvirtxml.DomainSnapshotDisk{Name: disk.Target.Dev, Snapshot: "external",
					Driver: &libvirtxml.DomainDiskDriver{Type: "qcow2"},
					Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: o}}}
			}
			snap.Disks.Disks = append(snap.Disks.Disks, sd)
		}

		ind, frozen, err := d.freezeFor(sdom, st, req.GetFreeze())
		if err != nil {
			return err
		}
		at := d.cfg.Now()
		serr := sdom.CreateDiskSnapshot(snap)
		if frozen {
			if err := d.thaw(sdom); err != nil {
				return grpcError(errors.Join(serr, err))
			}
		}
		if serr != nil {
			return grpcError(fmt.Errorf("disk snapshot: %w", serr))
		}
		d.log.Info("disk snapshot taken", "disks", len(want), "indications", ind)
		out = &launcherpb.SnapshotDisksResponse{Indications: ind, TimeUnixMillis: at.UnixMilli()}
		return nil
	})
	return out, err
}

// freezeFor freezes the guest's file systems for a point in time when
// asked to, the domain is not paused (it stands still already) and a
// guest agent answers, and returns the snapshot's indications; frozen
// says a thaw is owed.
func (d *Driver) freezeFor(sdom SnapshottingDomain, st State, freeze bool) (ind []string, frozen bool, err error) {
	ind = []string{apiv1.IndicationOnline}
	switch {
	case st == StatePaused:
		return append(ind, apiv1.IndicationPaused), false, nil
	case !freeze:
		return append(ind, apiv1.IndicationNoGuestAgent), false, nil
	}
	switch err := sdom.FSFreeze(); {
	case errors.Is(err, ErrNoGuestAgent):
		d.log.Info("no guest agent to freeze the file systems; snapshot without", "err", err)
		return append(ind, apiv1.IndicationNoGuestAgent), false, nil
	case err != nil:
		return nil, false, grpcError(fmt.Errorf("freezing the guest's file systems: %w", err))
	}
	return append(ind, apiv1.IndicationGuestAgent), true, nil
}

// thaw thaws the guest's file systems, trying a few times: a guest left
// frozen stops writing.
func (d *Driver) thaw(sdom SnapshottingDomain) error {
	var err error
	for range 3 {
		if err = sdom.FSThaw(); err == nil {
			return nil
		}
		d.log.Warn("thawing the guest's file systems", "err", err)
	}
	return fmt.Errorf("thawing the guest's file systems: %w", err)
}

// migrating reports whether a migration of this domain runs.
func (d *Driver) migrating() bool {
	d.migs.mu.Lock()
	defer d.migs.mu.Unlock()
	return d.migs.cur != nil && d.migs.cur.st.GetRunning()
}

// CommitDisks merges each disk's overlay back into its volume: an active
// commit of the overlay into the file below it, waited on until it is
// ready and pivoted, so that the disk reads the volume again; then the
// overlay file is removed. A disk already on its volume only has a
// leftover overlay file removed, so a repeated call does nothing more.
func (d *Driver) CommitDisks(ctx context.Context, req *launcherpb.CommitDisksRequest) (*launcherpb.Empty, error) {
	if err := snapshotDisks("commit disks", req.GetDisks()); err != nil {
		return nil, err
	}
	err := d.onRunningDomain(ctx, "commit disks", func(dom Domain, sdom SnapshottingDomain, _ State) error {
		bySource, _, err := liveDisks(dom)
		if err != nil {
			return err
		}
		for _, disk := range req.GetDisks() {
			if dev, ok := bySource[disk.GetOverlayPath()]; ok {
				if err := d.commitDisk(ctx, sdom, dev); err != nil {
					return err
				}
				if after, _, err := liveDisks(dom); err != nil {
					return err
				} else if after[disk.GetPath()] != dev {
					return status.Errorf(codes.Internal, "commit disks: disk %s does not read %s after the pivot", dev, disk.GetPath())
				}
			}
			if err := os.Remove(disk.GetOverlayPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return status.Errorf(codes.Internal, "commit disks: removing the overlay: %v", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &launcherpb.Empty{}, nil
}

// commitDisk commits disk's active overlay down and pivots, resuming a
// commit job that already runs (a launcher that died waiting for one).
func (d *Driver) commitDisk(ctx context.Context, sdom SnapshottingDomain, dev string) error {
	job, ok, err := sdom.BlockJob(dev)
	if err != nil {
		return grpcError(fmt.Errorf("block job of %s: %w", dev, err))
	}
	if ok && !job.Commit {
		return status.Errorf(codes.FailedPrecondition, "commit disks: disk %s runs another block job", dev)
	}
	if !ok {
		if err := sdom.BlockCommitActive(dev); err != nil {
			return grpcError(fmt.Errorf("block commit of %s: %w", dev, err))
		}
	}
	t := d.clock.NewTicker(blockJobPoll)
	defer t.Stop()
	for {
		job, ok, err := sdom.BlockJob(dev)
		if err != nil {
			return grpcError(fmt.Errorf("block job of %s: %w", dev, err))
		}
		if !ok {
			return status.Errorf(codes.Aborted, "commit disks: the block commit of %s ended before it was ready", dev)
		}
		if job.Ready() {
			err := sdom.PivotBlockJob(dev)
			if err == nil {
				return nil
			}
			if !errors.Is(err, ErrJobNotReady) {
				return grpcError(fmt.Errorf("pivot of %s: %w", dev, err))
			}
		}
		select {
		case <-ctx.Done():
			// The job goes on in QEMU; the next call resumes waiting.
			return status.FromContextError(ctx.Err()).Err()
		case <-t.C():
		}
	}
}
