package fake

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// The fake's online snapshots: SnapshotDisks writes each overlay file
// (empty, as libvirt would create it) and records that the disk now
// writes to it (Domain.Overlays); CommitDisks forgets that and removes the
// overlay file. The volume files themselves are the test's.

// ErrMigrating is the launcher's refusal of a snapshot during a
// migration (KubeVirt's message).
const ErrMigrating = "failed to freeze VMI, VMI is currently during migration"

func (c *client) SnapshotDisks(ctx context.Context, req *launcherpb.SnapshotDisksRequest) (*launcherpb.SnapshotDisksResponse, error) {
	if err := c.enter(ctx, Call{Op: "SnapshotDisks"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	d, err := c.snapshotTarget()
	if err != nil {
		return nil, err
	}
	if d.Overlays == nil {
		d.Overlays = map[string]string{}
	}
	for _, disk := range req.GetDisks() {
		if cur := d.Overlays[disk.GetPath()]; cur != "" {
			return nil, status.Errorf(codes.FailedPrecondition, "disk %s already writes to overlay %s", disk.GetPath(), cur)
		}
	}
	for _, disk := range req.GetDisks() {
		if err := os.WriteFile(disk.GetOverlayPath(), nil, 0o600); err != nil {
			return nil, status.Errorf(codes.Unknown, "creating overlay: %v", err)
		}
		d.Overlays[disk.GetPath()] = disk.GetOverlayPath()
	}
	ind := []string{apiv1.IndicationOnline}
	switch {
	case d.State == StatePaused:
		ind = append(ind, apiv1.IndicationPaused)
	case req.GetFreeze() && d.GuestAgentConnected:
		d.Freezes++
		ind = append(ind, apiv1.IndicationGuestAgent)
	default:
		ind = append(ind, apiv1.IndicationNoGuestAgent)
	}
	return &launcherpb.SnapshotDisksResponse{Indications: ind, TimeUnixMillis: m.now().UnixMilli()}, nil
}

// snapshotTarget is the domain a snapshot or a freeze acts on, or the
// launcher's refusal: not running, migrating, or the error the test set
// (SetSnapshotError). m.mu is held.
func (c *client) snapshotTarget() (*Domain, error) {
	m := c.m
	d := m.domains[c.domain]
	if d == nil || d.State != StateRunning && d.State != StatePaused {
		return nil, status.Errorf(codes.FailedPrecondition, "domain %s is not running", c.domain)
	}
	if mig := m.migrations[c.domain]; mig != nil && mig.GetRunning() {
		return nil, status.Error(codes.FailedPrecondition, ErrMigrating)
	}
	if err := m.snapshotErr[c.domain]; err != nil {
		return nil, err
	}
	return d, nil
}

func (c *client) CommitDisks(ctx context.Context, req *launcherpb.CommitDisksRequest) error {
	if err := c.enter(ctx, Call{Op: "CommitDisks"}); err != nil {
		return err
	}
	m := c.m
	defer m.mu.Unlock()
	d := m.domains[c.domain]
	if d == nil || d.State != StateRunning && d.State != StatePaused {
		return status.Errorf(codes.FailedPrecondition, "domain %s is not running", c.domain)
	}
	for _, disk := range req.GetDisks() {
		if d.Overlays[disk.GetPath()] == disk.GetOverlayPath() {
			delete(d.Overlays, disk.GetPath())
		}
		if err := os.Remove(disk.GetOverlayPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return status.Errorf(codes.Unknown, "removing overlay: %v", err)
		}
	}
	return nil
}

func (c *client) Freeze(ctx context.Context, _ *launcherpb.FreezeRequest) (*launcherpb.SnapshotDisksResponse, error) {
	if err := c.enter(ctx, Call{Op: "Freeze"}); err != nil {
		return nil, err
	}
	m := c.m
	defer m.mu.Unlock()
	d, err := c.snapshotTarget()
	if err != nil {
		return nil, err
	}
	ind := []string{apiv1.IndicationOnline}
	switch {
	case d.State == StatePaused:
		ind = append(ind, apiv1.IndicationPaused)
	case d.GuestAgentConnected:
		d.Freezes++
		d.Frozen = true
		ind = append(ind, apiv1.IndicationGuestAgent)
	default:
		ind = append(ind, apiv1.IndicationNoGuestAgent)
	}
	return &launcherpb.SnapshotDisksResponse{Indications: ind, TimeUnixMillis: m.now().UnixMilli()}, nil
}

func (c *client) Thaw(ctx context.Context) error {
	if err := c.enter(ctx, Call{Op: "Thaw"}); err != nil {
		return err
	}
	m := c.m
	defer m.mu.Unlock()
	if d := m.domains[c.domain]; d != nil {
		d.Frozen = false
	}
	return nil
}

// SetSnapshotError makes SnapshotDisks and Freeze of domain fail with libvirt's
// message (an empty message clears it).
func (m *Manager) SetSnapshotError(domain, libvirtMessage string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snapshotErr == nil {
		m.snapshotErr = map[string]error{}
	}
	if libvirtMessage == "" {
		delete(m.snapshotErr, domain)
		return
	}
	m.snapshotErr[domain] = status.Error(codes.Unknown, libvirtMessage)
}

func (m *Manager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}
