package driver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// Disks plugged into and unplugged from the running domain
// (docs/hotplug.md). The node agent decides what is plugged (the
// instance's hotpluggable volumes) and prepares the volume; the launcher
// plugs the typed disk libvirt-side, live and in the persistent
// definition, and unplugs it: libvirt asks the guest to release the disk
// (an ACPI or PCIe hot-unplug request, which the guest may take seconds
// over or ignore) and says it is gone with its device-removed event.

// HotplugDomain is what plugging needs of a libvirt domain
// (launcher/internal/virt implements it; tests use a fake).
type HotplugDomain interface {
	// AttachDevice plugs the device (its XML) into the live domain and
	// its persistent definition (VIR_DOMAIN_AFFECT_LIVE|CONFIG).
	AttachDevice(xml string) error
	// DetachDevice asks the guest to release the device (LIVE) and, with
	// config, removes it from the persistent definition too (CONFIG); the
	// device is gone from the live domain when libvirt's device-removed
	// event says so.
	DetachDevice(xml string, config bool) error
	// PersistentXML is the persistent definition (VIR_DOMAIN_XML_INACTIVE).
	PersistentXML() (string, error)
}

// unplugs is what the driver knows of the unplugs it asked for: when each
// was asked (by device alias), and a channel closed when libvirt says the
// device is gone.
type unplugs struct {
	mu        sync.Mutex
	requested map[string]time.Time
	gone      map[string]chan struct{}
}

// wait returns a channel closed when alias is removed.
func (u *unplugs) wait(alias string) <-chan struct{} {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.gone == nil {
		u.gone = map[string]chan struct{}{}
	}
	ch, ok := u.gone[alias]
	if !ok {
		ch = make(chan struct{})
		u.gone[alias] = ch
	}
	return ch
}

// removed is libvirt's device-removed event for alias.
func (u *unplugs) removed(alias string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.requested, alias)
	if ch, ok := u.gone[alias]; ok {
		close(ch)
		delete(u.gone, alias)
	}
}

// requestedAt is when the unplug of alias was asked, or zero.
func (u *unplugs) requestedAt(alias string) time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.requested[alias]
}

func (u *unplugs) request(alias string, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.requested == nil {
		u.requested = map[string]time.Time{}
	}
	u.requested[alias] = at
}

// forget drops alias's records (the disk is not in the domain): a
// waiter is released as by its removal.
func (u *unplugs) forget(alias string) { u.removed(alias) }

// hotplugTarget is the running domain a hotplug call acts on, checked:
// this VMI's, running, not migrating, able to plug. The caller frees dom.
func (d *Driver) hotplugTarget(what string) (Domain, HotplugDomain, domxml.Metadata, error) {
	dom, err := d.lookup()
	if err != nil {
		return nil, nil, domxml.Metadata{}, err
	}
	if dom == nil {
		return nil, nil, domxml.Metadata{}, status.Errorf(codes.FailedPrecondition, "%s: domain %s does not exist", what, d.cfg.DomainName)
	}
	fail := func(err error) (Domain, HotplugDomain, domxml.Metadata, error) {
		dom.Free()
		return nil, nil, domxml.Metadata{}, err
	}
	md, err := d.owned(dom)
	if err != nil {
		return fail(err)
	}
	st, _, err := dom.GetState()
	if err != nil {
		return fail(grpcError(fmt.Errorf("get domain state: %w", err)))
	}
	if !st.Active() {
		return fail(status.Errorf(codes.FailedPrecondition, "%s: domain %s is %s, not running", what, d.cfg.DomainName, st))
	}
	if d.migrating() {
		// The target defined the domain as the spec was: a disk plugged
		// now would be in the source only (domxml.alignDevices refuses).
		return fail(status.Errorf(codes.FailedPrecondition, "%s: domain %s is migrating", what, d.cfg.DomainName))
	}
	hdom, ok := dom.(HotplugDomain)
	if !ok {
		return fail(status.Errorf(codes.Unimplemented, "%s: this libvirt domain cannot plug devices", what))
	}
	return dom, hdom, md, nil
}

// AttachDisk plugs the disk into the running domain, live and in its
// persistent definition, on the first free target of its bus, after the
// virtio-scsi controller a scsi disk needs when the domain has none. A
// disk plugged already is reported as it is; one whose unplug is under
// way is refused until the guest released it.
func (d *Driver) AttachDisk(ctx context.Context, req *launcherpb.AttachDiskRequest) (*launcherpb.DiskAttachment, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	src := req.GetDisk()
	alias := domxml.DiskAlias(src.GetName())
	switch {
	case src.GetName() == "" || alias == "":
		return nil, status.Errorf(codes.InvalidArgument, "attach disk: disk name %q is not a valid device name", src.GetName())
	case !src.GetHotpluggable():
		return nil, status.Errorf(codes.InvalidArgument, "attach disk %q: only a hotpluggable disk is plugged into a running domain", src.GetName())
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dom, hdom, md, err := d.hotplugTarget("attach disk " + src.GetName())
	if err != nil {
		return nil, err
	}
	defer dom.Free()
	live, err := dom.GetXMLDesc()
	if err != nil {
		return nil, grpcError(fmt.Errorf("get domain XML: %w", err))
	}
	if cur, ok, err := diskByAlias(live, alias); err != nil {
		return nil, err
	} else if ok {
		if at := d.unplug.requestedAt(alias); !at.IsZero() {
			return nil, status.Errorf(codes.FailedPrecondition, "attach disk %q: it is being unplugged (asked %s ago) and "+
				"the guest has not released it yet", src.GetName(), d.cfg.Now().Sub(at).Round(time.Second))
		}
		return attachment(src.GetName(), cur, time.Time{}), nil
	}
	// The disk's class may be new to the domain: its key first.
	if err := d.setSecrets(&launcherpb.SyncOptions{CephSecrets: req.GetCephSecrets()}); err != nil {
		return nil, err
	}
	disk, needSCSI, err := domxml.HotplugDisk(src, live)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "attach disk: %v", err)
	}
	if needSCSI {
		c := domxml.SCSIController()
		x, err := c.Marshal()
		if err != nil {
			return nil, status.Errorf(codes.Internal, "attach disk: marshal the SCSI controller: %v", err)
		}
		if err := hdom.AttachDevice(x); err != nil {
			return nil, grpcError(fmt.Errorf("attach disk %q: plugging the virtio-scsi controller it needs: %w", src.GetName(), err))
		}
		d.log.Info("plugged a virtio-scsi controller for a scsi disk", "disk", src.GetName())
	}
	x, err := disk.Marshal()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "attach disk: marshal: %v", err)
	}
	if err := hdom.AttachDevice(x); err != nil {
		return nil, grpcError(fmt.Errorf("attach disk %q (%s): %w", src.GetName(), disk.Target.Dev, err))
	}
	// A shared file stays out of a migration's copy (localDisks), as the
	// disks defined with the domain are.
	if src.GetShared() && !slices.Contains(md.SharedDisks, src.GetName()) {
		md.SharedDisks = append(md.SharedDisks, src.GetName())
		if err := writeMetadata(dom, md); err != nil {
			return nil, grpcError(err)
		}
	}
	d.log.Info("plugged a disk into the running domain", "disk", src.GetName(), "target", disk.Target.Dev, "bus", disk.Target.Bus)
	return attachment(src.GetName(), disk, time.Time{}), nil
}

// DetachDisk asks the guest to release the disk and waits up to
// wait_millis for libvirt to say it did. The answer says whether the
// disk is still in the domain, and since when its unplug was asked. The
// unplug is asked once: a second press of a PCIe slot's attention button
// within five seconds cancels the first, so a call while one is under
// way only waits. A disk not in the domain is reported detached.
func (d *Driver) DetachDisk(ctx context.Context, req *launcherpb.DetachDiskRequest) (*launcherpb.DiskAttachment, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	name := req.GetName()
	alias := domxml.DiskAlias(name)
	if name == "" || alias == "" {
		return nil, status.Errorf(codes.InvalidArgument, "detach disk: disk name %q is not a valid device name", name)
	}
	gone, out, err := d.requestUnplug(name, alias)
	if err != nil || out != nil {
		return out, err
	}
	if wait := time.Duration(req.GetWaitMillis()) * time.Millisecond; wait > 0 {
		timer := d.clock.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-gone:
		case <-timer.C():
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.unplugState(name, alias)
}

// requestUnplug asks the guest to release the disk unless that was asked
// already, and returns what closes when libvirt says it is gone; or, for
// a disk not in the domain, the answer itself.
func (d *Driver) requestUnplug(name, alias string) (<-chan struct{}, *launcherpb.DiskAttachment, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dom, hdom, md, err := d.hotplugTarget("detach disk " + name)
	if err != nil {
		return nil, nil, err
	}
	defer dom.Free()
	live, err := dom.GetXMLDesc()
	if err != nil {
		return nil, nil, grpcError(fmt.Errorf("get domain XML: %w", err))
	}
	cur, ok, err := diskByAlias(live, alias)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		d.unplug.forget(alias)
		return nil, &launcherpb.DiskAttachment{Name: name}, d.forgetShared(dom, md, name)
	}
	// Subscribed before the request, so that a removal right after it is
	// not missed.
	gone := d.unplug.wait(alias)
	if !d.unplug.requestedAt(alias).IsZero() {
		return gone, nil, nil
	}
	one := libvirtxml.DomainDisk{Device: cur.Device, Target: cur.Target, Alias: cur.Alias, Source: cur.Source, Driver: cur.Driver}
	x, err := one.Marshal()
	if err != nil {
		return nil, nil, status.Errorf(codes.Internal, "detach disk: marshal: %v", err)
	}
	// The persistent definition may have lost it already (an unplug asked
	// by an earlier launcher of this domain): libvirt refuses CONFIG for a
	// device it does not have there.
	persistent, err := hdom.PersistentXML()
	if err != nil {
		return nil, nil, grpcError(fmt.Errorf("read the persistent definition: %w", err))
	}
	_, inConfig, err := diskByAlias(persistent, alias)
	if err != nil {
		return nil, nil, err
	}
	if err := hdom.DetachDevice(x, inConfig); err != nil && !unplugUnderWay(err) {
		return nil, nil, grpcError(fmt.Errorf("detach disk %q (%s): %w", name, domxml.DiskTarget(cur), err))
	}
	d.unplug.request(alias, d.cfg.Now())
	d.log.Info("asked the guest to release a disk", "disk", name, "target", domxml.DiskTarget(cur))
	return gone, nil, nil
}

// unplugState reports the disk after a wait for its unplug. Called with
// d.mu held.
func (d *Driver) unplugState(name, alias string) (*launcherpb.DiskAttachment, error) {
	dom, err := d.lookup()
	if err != nil {
		return nil, err
	}
	if dom == nil {
		d.unplug.forget(alias)
		return &launcherpb.DiskAttachment{Name: name}, nil
	}
	defer dom.Free()
	live, err := dom.GetXMLDesc()
	if err != nil {
		return nil, grpcError(fmt.Errorf("get domain XML: %w", err))
	}
	cur, ok, err := diskByAlias(live, alias)
	if err != nil {
		return nil, err
	}
	if !ok {
		d.unplug.forget(alias)
		d.log.Info("the guest released a disk", "disk", name)
		md, _, err := readMetadata(dom)
		if err != nil {
			return nil, grpcError(err)
		}
		return &launcherpb.DiskAttachment{Name: name}, d.forgetShared(dom, md, name)
	}
	return attachment(name, cur, d.unplug.requestedAt(alias)), nil
}

// forgetShared drops an unplugged disk from the domain's shared disks.
func (d *Driver) forgetShared(dom Domain, md domxml.Metadata, name string) error {
	if !slices.Contains(md.SharedDisks, name) {
		return nil
	}
	md.SharedDisks = slices.DeleteFunc(md.SharedDisks, func(n string) bool { return n == name })
	return grpcError(writeMetadata(dom, md))
}

// Disks lists the running domain's disks as libvirt has them live.
func (d *Driver) Disks(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.DiskList, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	dom, _, _, err := d.hotplugTarget("disks")
	if err != nil {
		return nil, err
	}
	defer dom.Free()
	_, disks, err := liveDisks(dom)
	if err != nil {
		return nil, err
	}
	out := &launcherpb.DiskList{}
	for _, disk := range disks {
		if disk.Alias == nil {
			continue
		}
		name, ok := domxml.DiskName(disk.Alias.Name)
		if !ok {
			continue
		}
		out.Disks = append(out.Disks, attachment(name, disk, d.unplug.requestedAt(disk.Alias.Name)))
	}
	return out, nil
}

func attachment(name string, disk libvirtxml.DomainDisk, unplugAsked time.Time) *launcherpb.DiskAttachment {
	a := &launcherpb.DiskAttachment{Name: name, Serial: disk.Serial, Attached: true}
	if disk.Target != nil {
		a.Target, a.Bus = disk.Target.Dev, disk.Target.Bus
	}
	if !unplugAsked.IsZero() {
		a.DetachRequestedUnixMillis = unplugAsked.UnixMilli()
	}
	return a
}

// diskByAlias finds the disk of alias in domain XML x.
func diskByAlias(x, alias string) (libvirtxml.DomainDisk, bool, error) {
	var def libvirtxml.Domain
	if err := def.Unmarshal(x); err != nil {
		return libvirtxml.DomainDisk{}, false, status.Errorf(codes.Internal, "parsing the domain XML: %v", err)
	}
	if def.Devices == nil {
		return libvirtxml.DomainDisk{}, false, nil
	}
	for _, disk := range def.Devices.Disks {
		if disk.Alias != nil && disk.Alias.Name == alias {
			return disk, true, nil
		}
	}
	return libvirtxml.DomainDisk{}, false, nil
}

// unplugUnderWay reports libvirt's (QEMU's) refusal of an unplug request
// because one is under way already: the request stands.
func unplugUnderWay(err error) bool {
	return strings.Contains(err.Error(), "already in the process of unplug")
}
