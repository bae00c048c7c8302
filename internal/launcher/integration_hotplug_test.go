package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Hotplug on a real guest: the launcher plugs a virtio disk (into one of
// the PCIe root ports it keeps free) and a scsi disk (after the
// virtio-scsi controller it needs) into the running domain, the guest's
// kernel sees both appear with their serials (testguest.BlockWatch), and
// unplugging them has the guest let go of each (libvirt's device-removed
// event). The domain and its QEMU stay the same throughout.

// guestDisks is what the guest printed of its disks so far.
func (e *env) guestDisks() (now map[string]testguest.BlockDevice, added, removed map[string]int) {
	b, _ := os.ReadFile(filepath.Join(e.dir, "console.log"))
	return testguest.BlockDevices(string(b))
}

// waitGuestDisk waits until the guest has (present) or no longer has a
// disk of serial.
func (e *env) waitGuestDisk(serial string, present bool) testguest.BlockDevice {
	e.t.Helper()
	var dev testguest.BlockDevice
	testutil.EventuallyNoError(e.t, guestBootTimeout, fmt.Sprintf("disk %s present=%v in the guest", serial, present), func() error {
		now, _, _ := e.guestDisks()
		var ok bool
		if dev, ok = testguest.BlockBySerial(now, serial); ok != present {
			return fmt.Errorf("guest disks %v", now)
		}
		return nil
	})
	return dev
}

func TestLauncherHotplugsDisks(t *testing.T) {
	e := newEnv(t)
	g := installGuest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	vdir := testguest.ReachableDir(t, "vp-launcher-hotplug-")
	mk := func(name, size string) string {
		p := filepath.Join(vdir, name+".qcow2")
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", p, size).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img create: %v: %s", err, out)
		}
		return p
	}
	c, _ := e.launch(ctx)
	v := e.vmi(apiv1.PhaseScheduled)
	v.Spec.Domain.Memory.Guest = "160Mi"
	st, err := c.Sync(ctx, v, e.guestOpts(g, testguest.Cmdline(testguest.Hostname("vp-it-hotplug"), testguest.BlockWatch())))
	wantState(t, st, err, "Running", "Booted")
	pid := st.GetQemuPid()
	e.waitConsole(testguest.MarkerBooted)
	events, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}

	virtio := &launcherpb.DiskSource{Name: "hot", Path: mk("hot", "24M"), Format: "qcow2", Device: "disk", Bus: "virtio", Hotpluggable: true}
	start := time.Now()
	a, err := c.AttachDisk(ctx, &launcherpb.AttachDiskRequest{Disk: virtio})
	if err != nil {
		t.Fatalf("AttachDisk virtio: %v", err)
	}
	if a.GetTarget() != "vda" || a.GetSerial() != "hot" {
		t.Fatalf("virtio disk %v, want vda with serial hot", a)
	}
	d := e.waitGuestDisk("hot", true)
	t.Logf("virtio disk in the guest as %s (%d bytes) %s after AttachDisk", d.Dev, d.Bytes, time.Since(start).Round(10*time.Millisecond))
	if d.Bytes != 24<<20 {
		t.Errorf("the guest sees %d bytes, want %d", d.Bytes, 24<<20)
	}

	scsi := &launcherpb.DiskSource{Name: "hots", Path: mk("hots", "8M"), Format: "qcow2", Device: "disk", Bus: "scsi", Serial: "SCSI-HOT", Hotpluggable: true}
	start = time.Now()
	if a, err = c.AttachDisk(ctx, &launcherpb.AttachDiskRequest{Disk: scsi}); err != nil {
		t.Fatalf("AttachDisk scsi: %v", err)
	}
	if a.GetTarget() != "sda" {
		t.Fatalf("scsi disk %v, want sda", a)
	}
	d = e.waitGuestDisk("SCSI-HOT", true)
	t.Logf("scsi disk in the guest as %s %s after AttachDisk", d.Dev, time.Since(start).Round(10*time.Millisecond))
	l, err := c.Disks(ctx)
	if err != nil || len(l.GetDisks()) != 2 {
		t.Fatalf("Disks: %v, %v", l, err)
	}
	// In the persistent definition too (CONFIG): a redefinition keeps them.
	if out, err := exec.Command("virsh", "-c", e.uri, "dumpxml", "--inactive", e.domain).Output(); err != nil ||
		!containsAll(string(out), "ua-disk-hot", "ua-disk-hots", virtio.GetPath()) {
		t.Errorf("persistent definition without the plugged disks (%v):\n%s", err, out)
	}

	for _, name := range []string{"hot", "hots"} {
		start = time.Now()
		a, err := c.DetachDisk(ctx, &launcherpb.DetachDiskRequest{Name: name, WaitMillis: 60_000})
		if err != nil {
			t.Fatalf("DetachDisk %s: %v", name, err)
		}
		if a.GetAttached() {
			t.Fatalf("DetachDisk %s: still attached after 60 s: %v", name, a)
		}
		t.Logf("%s released by the guest %s after DetachDisk", name, time.Since(start).Round(10*time.Millisecond))
		waitEvent(t, events, "DeviceRemoved/ua-disk-"+name)
	}
	e.waitGuestDisk("hot", false)
	e.waitGuestDisk("SCSI-HOT", false)
	if l, err := c.Disks(ctx); err != nil || len(l.GetDisks()) != 0 {
		t.Fatalf("Disks after the unplugs: %v, %v", l, err)
	}
	if out, err := exec.Command("virsh", "-c", e.uri, "dumpxml", "--inactive", e.domain).Output(); err != nil ||
		containsAll(string(out), "ua-disk-hot") {
		t.Errorf("persistent definition still has a plugged disk (%v)", err)
	}
	// Plugged again: the same target comes back, the guest sees it.
	if a, err := c.AttachDisk(ctx, &launcherpb.AttachDiskRequest{Disk: virtio}); err != nil || a.GetTarget() != "vda" {
		t.Fatalf("AttachDisk again: %v, %v", a, err)
	}
	e.waitGuestDisk("hot", true)
	if _, added, removed := e.guestDisks(); added["hot"] != 2 || removed["hot"] != 1 {
		t.Errorf("the guest saw hot added %d and removed %d times, want 2 and 1", added["hot"], removed["hot"])
	}
	st, err = c.GetDomain(ctx)
	if err != nil || st.GetQemuPid() != pid || st.GetState() != "Running" {
		t.Fatalf("domain after the hotplugs: %v, %v (QEMU pid was %d)", st, err, pid)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
