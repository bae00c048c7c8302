package fake

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// The fake's hotplug: a started domain's disks are those it was synced
// with, targets given in order per prefix as the launcher does; AttachDisk
// adds one on the first free target, DetachDisk removes it at once unless
// the domain holds unplugs (Domain.HoldUnplugs), until ReleaseDisk.

func targetPrefix(bus string) string {
	if bus == "" || bus == "virtio" {
		return "vd"
	}
	return "sd"
}

// bootDisks are the disks a domain starts with.
func bootDisks(opts *launcherpb.SyncOptions) []*launcherpb.DiskAttachment {
	var out []*launcherpb.DiskAttachment
	for _, s := range opts.GetDisks() {
		out = append(out, &launcherpb.DiskAttachment{Name: s.GetName(), Bus: s.GetBus(), Serial: s.GetSerial(),
			Target: freeTarget(out, targetPrefix(s.GetBus())), Attached: true})
	}
	return out
}

func freeTarget(disks []*launcherpb.DiskAttachment, prefix string) string {
	for i := 0; ; i++ {
		t := prefix + string(rune('a'+i))
		if !slices.ContainsFunc(disks, func(d *launcherpb.DiskAttachment) bool { return d.GetTarget() == t }) {
			return t
		}
	}
}

// running is the domain of c when it runs, locked; the caller unlocks.
func (c *client) running(ctx context.Context, op string) (*Domain, error) {
	if err := c.enter(ctx, Call{Op: op}); err != nil {
		return nil, err
	}
	d := c.m.domains[c.domain]
	if d == nil || d.State != StateRunning && d.State != StatePaused {
		c.m.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "%s: domain %s is not running", op, c.domain)
	}
	if mig := c.m.migrations[c.domain]; mig != nil && mig.GetRunning() {
		c.m.mu.Unlock()
		return nil, status.Errorf(codes.FailedPrecondition, "%s: domain %s is migrating", op, c.domain)
	}
	return d, nil
}

func (c *client) AttachDisk(ctx context.Context, req *launcherpb.AttachDiskRequest) (*launcherpb.DiskAttachment, error) {
	d, err := c.running(ctx, "AttachDisk")
	if err != nil {
		return nil, err
	}
	defer c.m.mu.Unlock()
	src := req.GetDisk()
	if !src.GetHotpluggable() {
		return nil, status.Errorf(codes.InvalidArgument, "attach disk %q: only a hotpluggable disk is plugged into a running domain", src.GetName())
	}
	for _, have := range d.Disks {
		if have.GetName() == src.GetName() {
			if have.GetDetachRequestedUnixMillis() != 0 {
				return nil, status.Errorf(codes.FailedPrecondition, "attach disk %q: it is being unplugged", src.GetName())
			}
			return proto.Clone(have).(*launcherpb.DiskAttachment), nil
		}
	}
	serial := src.GetSerial()
	if serial == "" {
		serial = src.GetName()
	}
	a := &launcherpb.DiskAttachment{Name: src.GetName(), Bus: src.GetBus(), Serial: serial,
		Target: freeTarget(d.Disks, targetPrefix(src.GetBus())), Attached: true}
	d.Disks = append(d.Disks, a)
	return proto.Clone(a).(*launcherpb.DiskAttachment), nil
}

func (c *client) DetachDisk(ctx context.Context, req *launcherpb.DetachDiskRequest) (*launcherpb.DiskAttachment, error) {
	d, err := c.running(ctx, "DetachDisk")
	if err != nil {
		return nil, err
	}
	defer c.m.mu.Unlock()
	i := slices.IndexFunc(d.Disks, func(a *launcherpb.DiskAttachment) bool { return a.GetName() == req.GetName() })
	if i < 0 {
		return &launcherpb.DiskAttachment{Name: req.GetName()}, nil
	}
	a := d.Disks[i]
	if a.DetachRequestedUnixMillis == 0 {
		if d.UnplugRequests == nil {
			d.UnplugRequests = map[string]int{}
		}
		d.UnplugRequests[a.GetName()]++
		a.DetachRequestedUnixMillis = c.m.now().UnixMilli()
	}
	if d.HoldUnplugs {
		return proto.Clone(a).(*launcherpb.DiskAttachment), nil
	}
	d.Disks = slices.Delete(d.Disks, i, i+1)
	return &launcherpb.DiskAttachment{Name: req.GetName()}, nil
}

func (c *client) Disks(ctx context.Context) (*launcherpb.DiskList, error) {
	d, err := c.running(ctx, "Disks")
	if err != nil {
		return nil, err
	}
	defer c.m.mu.Unlock()
	out := &launcherpb.DiskList{}
	for _, a := range d.Disks {
		out.Disks = append(out.Disks, proto.Clone(a).(*launcherpb.DiskAttachment))
	}
	return out, nil
}

// SetHoldUnplugs makes the guest of domain keep (or not) the disks it is
// asked to release.
func (m *Manager) SetHoldUnplugs(domain string, hold bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d := m.domains[domain]; d != nil {
		d.HoldUnplugs = hold
	}
}

// ReleaseDisk has the guest of domain let go of an unplugged disk, and
// says so as libvirt's device-removed event would.
func (m *Manager) ReleaseDisk(domain, name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.domains[domain]
	if d == nil {
		return
	}
	d.Disks = slices.DeleteFunc(d.Disks, func(a *launcherpb.DiskAttachment) bool {
		return a.GetName() == name && a.GetDetachRequestedUnixMillis() != 0
	})
	m.emit(domain, "DeviceRemoved/ua-disk-"+name)
}

// DiskTargets lists domain's disks as name=target.
func (m *Manager) DiskTargets(domain string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	if d := m.domains[domain]; d != nil {
		for _, a := range d.Disks {
			out = append(out, a.GetName()+"="+a.GetTarget())
		}
	}
	return strings.Join(out, ",")
}
