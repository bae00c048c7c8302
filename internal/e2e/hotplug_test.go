package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestHotplugAcrossMigrationAndRestart (issue 35's acceptance): a running
// guest sees a hotpluggable volume appear when AddVolume adds it and
// vanish when RemoveVolume removes it, with no new instance (the same
// uid); a disk plugged in before a live migration is still in the guest
// after it (the guest on the target has it, and lets go of it when it is
// unplugged there); after a restart the new guest boots with it. On the
// local class (the volume copied by the migration), on rbd and on a
// shared filesystem (neither copied). The guest prints its disks as they come and go
// (testguest.BlockWatch); a disk is known in it by its serial, the
// volume's name.
func TestHotplugAcrossMigrationAndRestart(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{ceph: true})
	t.Cleanup(c.dumpOnFailure)
	c.rbdClass("ceph")
	nas := c.sharedClass("nas")
	c.waitNodesReach("ceph")
	c.waitNodesReach("nas")
	classes := map[string]string{"hp-local": "", "hp-rbd": "ceph", "hp-nas": "nas"}
	// The local VM's plugged volume is made from an image (the test
	// guest's disk), so that what a migration copies of it can be
	// compared.
	guestDir, err := testguest.Dir()
	if err != nil {
		t.Fatal(err)
	}
	seed, err := os.ReadFile(filepath.Join(guestDir, testguest.DiskFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.nodes {
		if err := os.WriteFile(filepath.Join(n.ImageDir, hotSeed), seed, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, class := range classes {
		disks := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
		vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "32Mi", StorageClass: class}}}
		vm := withDisks(guestVM(c.ns, name, apiv1.RunStrategyAlways, c.nodes[0].Kernel,
			testguest.Cmdline(testguest.Hostname(name), testguest.BlockWatch())), disks, vols)
		if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
			t.Fatal(err)
		}
	}
	for name, class := range classes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// The helpers fail the test they hold: this one.
			sub := *c
			sub.t = t
			sub.hotplugScenario(t, name, class, nas)
		})
	}
}

func (c *mnCluster) hotplugScenario(t *testing.T, name, class, nas string) {
	v := c.waitRunning(name)
	uid := v.GetMetadata().GetUid()
	con := c.nodeNamed(v.GetStatus().GetNodeName()).console(t, uid)
	con.waitMarker(testguest.MarkerBooted, bootTimeout)
	waitSerial(t, con, "", true) // the boot disk, without a serial

	// Plugged: the guest sees it; the instance is the same one.
	asked := time.Now()
	hotVol := &apiv1.PersistentVolume{Size: "48Mi", StorageClass: class}
	if class == "" {
		hotVol.Image = hotSeed
	}
	if _, err := c.api.VMs.AddVolume(c.ctx, &apiv1.AddVolumeRequest{
		Key: c.key(name), Disk: &apiv1.Disk{Name: "hot", Disk: &apiv1.DiskTarget{Bus: "virtio"}}, Volume: hotVol,
	}); err != nil {
		t.Fatal(err)
	}
	d := waitSerial(t, con, "hot", true)
	t.Logf("%s: the guest saw the hotplugged disk as %s (%d bytes) %s after AddVolume", name, d.Dev, d.Bytes, time.Since(asked).Round(time.Millisecond))
	if d.Bytes != 48<<20 {
		t.Errorf("the guest sees %d bytes of the plugged disk, want %d", d.Bytes, 48<<20)
	}
	c.wantSameInstance(t, name, uid)
	c.waitVolumeStatus(t, name, "hot", apiv1.VolumeReady)
	if restart := apiv1.FindCondition(c.vm(name).GetStatus().GetConditions(), apiv1.ConditionRestartRequired); restart != nil {
		t.Errorf("RestartRequired after a hotplug: %v", restart)
	}

	// Live migration: the target has the plugged disk (copied with the
	// local volume, the same image on rbd).
	from := c.nodeNamed(c.vmi(name).GetStatus().GetNodeName())
	to := c.otherNode(from)
	st := c.migrate(name, to).GetStatus().GetMigrationState()
	t.Logf("%s: migrated %s → %s with the plugged disk: method %s, %d disk bytes", name, from.Name, to.Name, st.GetMethod(), st.GetProgress().GetDiskTotalBytes())
	if class != "" && st.GetMethod() != apiv1.MigrationMethodLive {
		// A plugged disk on a class is no more copied than the others: a
		// shared file is recorded as such when it is plugged.
		t.Errorf("%s migrated with method %s, want %s: a disk on a class was copied", name, st.GetMethod(), apiv1.MigrationMethodLive)
	}
	c.wantSameInstance(t, name, uid)
	c.waitVolumeStatus(t, name, "hot", apiv1.VolumeReady)
	if class == "" {
		// The local plugged volume was copied: the target's file reads
		// as the image it was made from (grown with zeros).
		dir, err := nodedir.Layout{Root: to.NodeDir}.VMDir(c.vm(name).GetMetadata().GetUid())
		if err != nil {
			t.Fatal(err)
		}
		vol := filepath.Join(nodedir.VolumesDir(dir), "hot.qcow2")
		out, err := exec.CommandContext(c.ctx, "qemu-img", "compare", "-U", vol, filepath.Join(to.ImageDir, hotSeed)).CombinedOutput()
		if err != nil {
			t.Errorf("the plugged volume on %s after the migration differs from its image: %v %s", to.Name, err, out)
		}
	}
	there := to.console(t, uid)
	if _, _, removed := testguest.BlockDevices(con.text()); removed["hot"] > 0 {
		t.Fatalf("the guest lost the plugged disk before the migration ended:\n%s", con.text())
	}

	// Unplugged on the target: the guest there lets go of it.
	asked = time.Now()
	if _, err := c.api.VMs.RemoveVolume(c.ctx, &apiv1.RemoveVolumeRequest{Key: c.key(name), Name: "hot"}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, stateTimeout, "the guest on "+to.Name+" releases "+d.Dev, func() error {
		if !removedDev(there.text(), d.Dev) {
			return fmt.Errorf("console on %s:\n%s", to.Name, there.text())
		}
		return nil
	})
	t.Logf("%s: the guest on %s released the disk %s after RemoveVolume", name, to.Name, time.Since(asked).Round(time.Millisecond))
	testutil.Eventually(t, stateTimeout, "no volume status left", func() bool {
		return len(c.vmi(name).GetStatus().GetVolumeStatus()) == 0
	})
	c.wantSameInstance(t, name, uid)
	c.wantVolumeKept(t, name, class, nas, "hot")

	// Plugged again (the same volume: its data was kept), then a restart:
	// the new guest boots with it.
	if _, err := c.api.VMs.AddVolume(c.ctx, &apiv1.AddVolumeRequest{
		Key: c.key(name), Disk: &apiv1.Disk{Name: "hot"}, Volume: hotVol,
	}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, stateTimeout, "the guest on "+to.Name+" sees the disk again", func() error {
		if _, added, _ := testguest.BlockDevices(there.text()); added["hot"] == 0 {
			return fmt.Errorf("console on %s:\n%s", to.Name, there.text())
		}
		return nil
	})
	if _, err := c.api.VMs.Restart(c.ctx, &apiv1.RestartVirtualMachineRequest{Key: c.key(name)}); err != nil {
		t.Fatal(err)
	}
	var next *apiv1.VirtualMachineInstance
	testutil.Eventually(t, bootTimeout, name+" restarted", func() bool {
		next = c.vmi(name)
		return next.GetMetadata().GetUid() != uid && next.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	again := c.nodeNamed(next.GetStatus().GetNodeName()).console(t, next.GetMetadata().GetUid())
	again.waitMarker(testguest.MarkerBooted, bootTimeout)
	waitSerial(t, again, "hot", true)
	c.waitVolumeStatus(t, name, "hot", apiv1.VolumeReady)
}

// hotSeed is the image the local VM's plugged volume is made from.
const hotSeed = "hp-seed.qcow2"

// waitSerial waits until the guest on con has (present) or has not a
// disk of serial, and returns it.
func waitSerial(t *testing.T, con *console, serial string, present bool) testguest.BlockDevice {
	t.Helper()
	var d testguest.BlockDevice
	testutil.EventuallyNoError(t, bootTimeout, fmt.Sprintf("disk %q present=%v in the guest", serial, present), func() error {
		now, _, _ := testguest.BlockDevices(con.text())
		var ok bool
		if d, ok = testguest.BlockBySerial(now, serial); ok != present {
			return fmt.Errorf("guest disks %v; console:\n%s", now, con.text())
		}
		return nil
	})
	return d
}

// removedDev reports whether the console shows the guest's disk dev
// leave (a console that started after it appeared: after a migration).
func removedDev(console, dev string) bool {
	found := false
	testguest.EachMarker(console, func(_, rest string) {
		found = found || testguest.Fields(rest)["dev"] == dev
	}, testguest.MarkerBlockRemove)
	return found
}

func (c *mnCluster) wantSameInstance(t *testing.T, name, uid string) {
	t.Helper()
	if v := c.vmi(name); v.GetMetadata().GetUid() != uid || v.GetStatus().GetPhase() != apiv1.PhaseRunning {
		t.Fatalf("%s: instance %s in phase %s, want the same instance %s running", name, v.GetMetadata().GetUid(), v.GetStatus().GetPhase(), uid)
	}
}

// waitVolumeStatus waits until the instance shows volume vol in phase.
func (c *mnCluster) waitVolumeStatus(t *testing.T, name, vol, phase string) {
	t.Helper()
	testutil.EventuallyNoError(t, stateTimeout, name+" volume "+vol+" "+phase, func() error {
		st := apiv1.FindVolumeStatus(c.vmi(name).GetStatus().GetVolumeStatus(), vol)
		if st.GetPhase() != phase || (phase == apiv1.VolumeReady && st.GetTarget() == "") {
			return fmt.Errorf("volume status %v", c.vmi(name).GetStatus().GetVolumeStatus())
		}
		return nil
	})
}

// wantVolumeKept checks that an unplugged volume's data is still there:
// the rbd image, or the file in the VM's directory on its node.
func (c *mnCluster) wantVolumeKept(t *testing.T, name, class, nas, vol string) {
	t.Helper()
	vm := c.vm(name)
	switch class {
	case "nas":
		p := filepath.Join(nas, "virtplane", "vms", vm.GetMetadata().GetUid(), "volumes", vol+".qcow2")
		if _, err := os.Stat(p); err != nil {
			t.Errorf("the unplugged volume's shared file: %v", err)
		}
		return
	case "ceph":
		if size := rbdSize(t, c, rbdImageOf(vm, vol)); size != 48<<20 {
			t.Errorf("the unplugged rbd volume is %d bytes", size)
		}
		return
	}
	n := c.nodeNamed(c.vmi(name).GetStatus().GetNodeName())
	dir, err := nodedir.Layout{Root: n.NodeDir}.VMDir(vm.GetMetadata().GetUid())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(nodedir.VolumesDir(dir), vol+".qcow2")); err != nil {
		t.Errorf("the unplugged volume's file: %v", err)
	}
}
