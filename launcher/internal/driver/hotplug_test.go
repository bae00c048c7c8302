package driver

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

func hotDisk(name, bus string) *launcherpb.DiskSource {
	return &launcherpb.DiskSource{Name: name, Path: "/var/lib/virtplane/vms/y/volumes/" + name + ".qcow2", Format: "qcow2",
		Device: "disk", Bus: bus, Hotpluggable: true}
}

func (h *harness) attach(src *launcherpb.DiskSource) (*launcherpb.DiskAttachment, error) {
	return h.d.AttachDisk(context.Background(), &launcherpb.AttachDiskRequest{Disk: src})
}

func (h *harness) detach(name string, wait time.Duration) (*launcherpb.DiskAttachment, error) {
	return h.d.DetachDisk(context.Background(), &launcherpb.DetachDiskRequest{Name: name, WaitMillis: wait.Milliseconds()})
}

func (h *harness) diskNames() []string {
	h.t.Helper()
	l, err := h.d.Disks(context.Background(), &launcherpb.Empty{})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, d := range l.GetDisks() {
		out = append(out, d.GetName()+"="+d.GetTarget())
	}
	return out
}

// A disk is plugged into the running domain on the first free target of
// its bus, with its name as serial; plugging it again changes nothing;
// unplugging it waits for the guest (libvirt's device-removed event).
func TestAttachAndDetachDisk(t *testing.T) {
	h := newHarness(t)
	if _, err := h.syncDisks(vmi(apiv1.PhaseScheduled), 0); err != nil {
		t.Fatal(err)
	}
	a, err := h.attach(hotDisk("hot", "virtio"))
	if err != nil {
		t.Fatal(err)
	}
	if a.GetTarget() != "vdc" || a.GetSerial() != "hot" || !a.GetAttached() {
		t.Fatalf("attached %v, want vdc with serial hot", a)
	}
	if again, err := h.attach(hotDisk("hot", "virtio")); err != nil || again.GetTarget() != "vdc" {
		t.Fatalf("attach again: %v, %v", again, err)
	}
	if n := h.conn.callsMatching("AttachDevice"); n != 1 {
		t.Fatalf("%d AttachDevice calls, want 1", n)
	}
	if got, want := h.diskNames(), []string{"root=vda", "data=vdb", "hot=vdc"}; !slices.Equal(got, want) {
		t.Fatalf("disks %v, want %v", got, want)
	}

	// A scsi disk brings its controller, once.
	if a, err := h.attach(hotDisk("s1", "scsi")); err != nil || a.GetTarget() != "sda" {
		t.Fatalf("scsi: %v, %v", a, err)
	}
	if a, err := h.attach(hotDisk("s2", "scsi")); err != nil || a.GetTarget() != "sdb" {
		t.Fatalf("second scsi: %v, %v", a, err)
	}
	if n := h.conn.callsMatching("AttachDevice"); n != 4 {
		t.Fatalf("%d AttachDevice calls, want 4 (a controller and three disks)", n)
	}

	d, err := h.detach("hot", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if d.GetAttached() {
		t.Fatalf("detached disk still attached: %v", d)
	}
	if got, want := h.diskNames(), []string{"root=vda", "data=vdb", "s1=sda", "s2=sdb"}; !slices.Equal(got, want) {
		t.Fatalf("disks after the unplug %v, want %v", got, want)
	}
	// Gone already: reported detached, nothing asked of libvirt.
	if d, err := h.detach("hot", time.Second); err != nil || d.GetAttached() {
		t.Fatalf("detach again: %v, %v", d, err)
	}
	if n := h.conn.callsMatching("DetachDevice"); n != 1 {
		t.Fatalf("%d DetachDevice calls, want 1", n)
	}
	// The gap is taken by the next virtio disk.
	if a, err := h.attach(hotDisk("hot2", "virtio")); err != nil || a.GetTarget() != "vdc" {
		t.Fatalf("attach after an unplug: %v, %v", a, err)
	}
}

// A guest that does not release the disk: the call answers after its
// wait that it is still there and since when it was asked; the unplug is
// asked once (a second request would cancel the first on PCIe); the disk
// cannot be plugged again meanwhile; once the guest lets go, it is
// reported detached.
func TestDetachDiskTheGuestHolds(t *testing.T) {
	h := newHarness(t)
	if _, err := h.syncDisks(vmi(apiv1.PhaseScheduled), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := h.attach(hotDisk("hot", "virtio")); err != nil {
		t.Fatal(err)
	}
	h.conn.holdUnplugs(true)
	type result struct {
		a   *launcherpb.DiskAttachment
		err error
	}
	done := make(chan result, 1)
	go func() {
		a, err := h.detach("hot", 30*time.Second)
		done <- result{a, err}
	}()
	// The wait runs on the fake clock: let it pass (stepping until the
	// call answers, since its timer may not be set yet).
	var r result
	for waiting := true; waiting; {
		select {
		case r = <-done:
			waiting = false
		case <-time.After(5 * time.Millisecond):
			h.clk.Step(30 * time.Second)
		}
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if !r.a.GetAttached() || r.a.GetDetachRequestedUnixMillis() != h.now.UnixMilli() || r.a.GetTarget() != "vdc" {
		t.Fatalf("held: %v, want attached vdc with the request's time", r.a)
	}
	if a, err := h.detach("hot", 0); err != nil || !a.GetAttached() {
		t.Fatalf("asked again: %v, %v", a, err)
	}
	if n := h.conn.callsMatching("DetachDevice"); n != 1 {
		t.Fatalf("%d DetachDevice calls, want 1: the unplug is asked once", n)
	}
	_, err := h.attach(hotDisk("hot", "virtio"))
	wantCode(t, err, codes.FailedPrecondition, "being unplugged")

	if err := h.conn.release(testDomain, domxml.DiskAlias("hot")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := h.detach("hot", 0)
		if err != nil {
			t.Fatal(err)
		}
		if !a.GetAttached() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("released disk still reported attached")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := h.attach(hotDisk("hot", "virtio")); err != nil {
		t.Fatalf("plug again after the release: %v", err)
	}
}

// A shared file plugged in stays out of a migration's copy: the domain
// records it with the disks defined shared, and forgets it when it goes.
func TestHotplugSharedDiskRecorded(t *testing.T) {
	h := newHarness(t)
	if _, err := h.syncDisks(vmi(apiv1.PhaseScheduled), 0); err != nil {
		t.Fatal(err)
	}
	src := hotDisk("nfs", "virtio")
	src.Shared = true
	if _, err := h.attach(src); err != nil {
		t.Fatal(err)
	}
	if md := metadataOf(t, h.conn.get(testDomain)); !slices.Equal(md.SharedDisks, []string{"nfs"}) {
		t.Fatalf("shared disks %v after the plug", md.SharedDisks)
	}
	if _, err := h.detach("nfs", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if md := metadataOf(t, h.conn.get(testDomain)); len(md.SharedDisks) != 0 {
		t.Fatalf("shared disks %v after the unplug", md.SharedDisks)
	}
}

// What cannot be plugged is refused before libvirt sees it.
func TestHotplugRefusals(t *testing.T) {
	h := newHarness(t)
	_, err := h.attach(hotDisk("hot", "virtio"))
	wantCode(t, err, codes.FailedPrecondition, "does not exist")
	if _, err := h.syncDisks(vmi(apiv1.PhaseScheduled), 0); err != nil {
		t.Fatal(err)
	}
	plain := hotDisk("plain", "virtio")
	plain.Hotpluggable = false
	_, err = h.attach(plain)
	wantCode(t, err, codes.InvalidArgument, "only a hotpluggable disk")
	_, err = h.attach(hotDisk("Bad Name", "virtio"))
	wantCode(t, err, codes.InvalidArgument, "not a valid device name")
	_, err = h.attach(hotDisk("sata", "sata"))
	if err != nil {
		// SATA is the API's to refuse (validation); the launcher plugs
		// what libvirt takes, and libvirt refuses SATA hotplug itself.
		t.Logf("sata: %v", err)
	}
	if _, err := h.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	_, err = h.attach(hotDisk("late", "virtio"))
	wantCode(t, err, codes.FailedPrecondition, "not running")
	_, err = h.detach("hot", 0)
	wantCode(t, err, codes.FailedPrecondition, "not running")
}
