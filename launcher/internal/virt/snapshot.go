//go:build libvirt

package virt

import (
	"errors"
	"fmt"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

var _ driver.SnapshottingDomain = (*domain)(nil)

// FSFreeze freezes every file system the guest agent knows of. The
// agent's answer is bounded (agentTimeout): a guest that stopped
// answering must not hold the snapshot.
func (d *domain) FSFreeze() error {
	if err := d.d.AgentSetResponseTimeout(agentTimeout, 0); err != nil {
		return d.agentError(err)
	}
	return d.agentError(d.d.FSFreeze(nil, 0))
}

func (d *domain) FSThaw() error { return d.agentError(d.d.FSThaw(nil, 0)) }

// agentError makes libvirt's ways of saying that no guest agent answers
// (none configured, not connected, not answering, no such command)
// driver.ErrNoGuestAgent.
func (d *domain) agentError(err error) error {
	var lerr libvirt.Error
	if errors.As(err, &lerr) {
		switch lerr.Code {
		case libvirt.ERR_AGENT_UNRESPONSIVE, libvirt.ERR_AGENT_UNSYNCED, libvirt.ERR_AGENT_COMMAND_TIMEOUT,
			libvirt.ERR_ARGUMENT_UNSUPPORTED, libvirt.ERR_OPERATION_UNSUPPORTED, libvirt.ERR_NO_SUPPORT:
			return fmt.Errorf("%w: %s", driver.ErrNoGuestAgent, lerr.Message)
		}
	}
	return d.wrap(err)
}

// CreateDiskSnapshot takes an external, disk-only snapshot that libvirt
// keeps no record of (the overlays are the agent's to commit), of all
// listed disks or none (ATOMIC).
func (d *domain) CreateDiskSnapshot(snap *libvirtxml.DomainSnapshot) error {
	x, err := snap.Marshal()
	if err != nil {
		return fmt.Errorf("snapshot XML: %w", err)
	}
	s, err := d.d.CreateSnapshotXML(x, libvirt.DOMAIN_SNAPSHOT_CREATE_DISK_ONLY|libvirt.DOMAIN_SNAPSHOT_CREATE_NO_METADATA|libvirt.DOMAIN_SNAPSHOT_CREATE_ATOMIC)
	if err != nil {
		return d.wrap(err)
	}
	_ = s.Free()
	return nil
}

// BlockCommitActive commits disk's active layer into the one below it
// only (SHALLOW): a volume may itself have a backing file.
func (d *domain) BlockCommitActive(disk string) error {
	return d.wrap(d.d.BlockCommit(disk, "", "", 0, libvirt.DOMAIN_BLOCK_COMMIT_ACTIVE|libvirt.DOMAIN_BLOCK_COMMIT_SHALLOW))
}

// BlockJob reads disk's block job. libvirt answers a disk without a job
// with an info of type 0 (unknown).
func (d *domain) BlockJob(disk string) (driver.BlockJobInfo, bool, error) {
	info, err := d.d.GetBlockJobInfo(disk, 0)
	if err != nil {
		return driver.BlockJobInfo{}, false, d.wrap(err)
	}
	if info.Type == libvirt.DOMAIN_BLOCK_JOB_TYPE_UNKNOWN {
		return driver.BlockJobInfo{}, false, nil
	}
	commit := info.Type == libvirt.DOMAIN_BLOCK_JOB_TYPE_ACTIVE_COMMIT || info.Type == libvirt.DOMAIN_BLOCK_JOB_TYPE_COMMIT
	return driver.BlockJobInfo{Commit: commit, Cur: info.Cur, End: info.End}, true, nil
}

// PivotBlockJob pivots synchronously (no ASYNC flag): libvirt returns
// once the disk reads the base.
// libvirt refuses with BLOCK_COPY_ACTIVE until it has handled QEMU's
// BLOCK_JOB_READY event, which can come after the job info already says
// ready: driver.ErrJobNotReady, and the caller tries again.
func (d *domain) PivotBlockJob(disk string) error {
	err := d.d.BlockJobAbort(disk, libvirt.DOMAIN_BLOCK_JOB_ABORT_PIVOT)
	var lerr libvirt.Error
	if errors.As(err, &lerr) && lerr.Code == libvirt.ERR_BLOCK_COPY_ACTIVE {
		return fmt.Errorf("%w: %s", driver.ErrJobNotReady, lerr.Message)
	}
	return d.wrap(err)
}
