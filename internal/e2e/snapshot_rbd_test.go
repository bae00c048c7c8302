package e2e

import (
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// rbdCounterVM is the test guest with one persistent volume, "data"
// (vda), on storage class class, carrying its boot counter
// (testguest.Persist). It is not pinned: placement picks the node.
func (c *mnCluster) rbdCounterVM(name, class, size string) *apiv1.VirtualMachine {
	vm := guestVM(c.ns, name, apiv1.RunStrategyAlways, c.nodes[0].Kernel,
		testguest.Cmdline(testguest.Hostname("vp-"+name), testguest.Persist("/dev/vda")))
	return withDisks(vm, []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
		[]*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: size, StorageClass: class}}})
}

// bootAnywhere waits until VM name runs an instance other than notUID,
// on whatever node, and for the guest to write its boot counter; it
// returns the instance, its node, the counter line found and the count
// written.
func (c *mnCluster) bootAnywhere(name, notUID string) (*apiv1.VirtualMachineInstance, *mnNode, string, string) {
	c.t.Helper()
	var vmi *apiv1.VirtualMachineInstance
	testutil.Eventually(c.t, bootTimeout, name+" running", func() bool {
		vmi = c.vmi(name)
		return vmi.GetStatus().GetPhase() == apiv1.PhaseRunning && vmi.GetMetadata().GetUid() != notUID
	})
	n := c.nodeNamed(vmi.GetStatus().GetNodeName())
	con := n.console(c.t, vmi.GetMetadata().GetUid())
	prev := con.waitMarker(testguest.MarkerPersistPrevious, bootTimeout)
	wrote := testguest.Fields(con.waitMarker(testguest.MarkerPersistWrote, stateTimeout))["boot"]
	return vmi, n, prev, wrote
}

// setRunning starts or stops VM name and, stopping, waits until it has no
// instance.
func (c *mnCluster) setRunning(name string, run bool) {
	c.t.Helper()
	var err error
	if run {
		_, err = c.api.VMs.Start(c.ctx, &apiv1.StartVirtualMachineRequest{Key: c.key(name)})
	} else {
		_, err = c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key(name)})
	}
	if err != nil {
		c.t.Fatal(err)
	}
	if !run {
		testutil.Eventually(c.t, stateTimeout, name+" stopped", func() bool {
			return c.vm(name).GetStatus().GetPrintableStatus() == apiv1.PrintableStopped
		})
	}
}

// takeSnapshot snapshots VM vm and waits until the snapshot is ready,
// returning it and how long that took from the create call.
func (c *mnCluster) takeSnapshot(name, vm string) (*apiv1.VirtualMachineSnapshot, time.Duration) {
	c.t.Helper()
	began := time.Now()
	if _, err := c.api.Snapshots.Create(c.ctx, &apiv1.CreateSnapshotRequest{Snapshot: &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: vm},
	}}); err != nil {
		c.t.Fatal(err)
	}
	var s *apiv1.VirtualMachineSnapshot
	testutil.Eventually(c.t, snapshotTimeout, "snapshot "+name+" final", func() bool {
		var err error
		if s, err = c.api.Snapshots.Get(c.ctx, &apiv1.GetSnapshotRequest{Key: c.key(name)}); err != nil {
			c.t.Fatal(err)
		}
		p := s.GetStatus().GetPhase()
		return p == apiv1.SnapshotSucceeded || p == apiv1.SnapshotFailed
	})
	took := time.Since(began)
	if st := s.GetStatus(); st.GetPhase() != apiv1.SnapshotSucceeded || !st.GetReadyToUse() {
		c.t.Fatalf("snapshot %s: %s, error %q", name, st.GetPhase(), st.GetError())
	}
	c.t.Logf("snapshot %s of %s ready in %s: indications %v, volumes %v, node %q", name, vm, took.Round(time.Millisecond),
		s.GetStatus().GetIndications(), s.GetStatus().GetIncludedVolumes(), s.GetStatus().GetNodeName())
	return s, took
}

// restoreInto restores snapshot into vm and waits until it completed.
func (c *mnCluster) restoreInto(name, vm, snapshot string) (*apiv1.VirtualMachineRestore, time.Duration) {
	c.t.Helper()
	began := time.Now()
	if _, err := c.api.Restores.Create(c.ctx, &apiv1.CreateRestoreRequest{Restore: &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: vm, Snapshot: snapshot},
	}}); err != nil {
		c.t.Fatal(err)
	}
	var r *apiv1.VirtualMachineRestore
	testutil.Eventually(c.t, snapshotTimeout, "restore "+name+" final", func() bool {
		var err error
		if r, err = c.api.Restores.Get(c.ctx, &apiv1.GetRestoreRequest{Key: c.key(name)}); err != nil {
			c.t.Fatal(err)
		}
		return r.GetStatus().GetComplete() || r.GetStatus().GetPhase() == apiv1.RestoreFailed
	})
	took := time.Since(began)
	if !r.GetStatus().GetComplete() {
		c.t.Fatalf("restore %s: %s, error %q", name, r.GetStatus().GetPhase(), r.GetStatus().GetError())
	}
	c.t.Logf("restore %s of %s into %s complete in %s (node %q)", name, snapshot, vm, took.Round(time.Millisecond), r.GetStatus().GetNodeName())
	return r, took
}

// cloneOf clones kind/source into target and waits until it succeeded.
func (c *mnCluster) cloneOf(name, kind, source, target string) time.Duration {
	c.t.Helper()
	began := time.Now()
	if _, err := c.api.Clones.Create(c.ctx, &apiv1.CreateCloneRequest{Clone: &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec:     &apiv1.VirtualMachineCloneSpec{SourceKind: kind, SourceName: source, Target: target},
	}}); err != nil {
		c.t.Fatal(err)
	}
	var cl *apiv1.VirtualMachineClone
	testutil.Eventually(c.t, snapshotTimeout, "clone "+name+" final", func() bool {
		var err error
		if cl, err = c.api.Clones.Get(c.ctx, &apiv1.GetCloneRequest{Key: c.key(name)}); err != nil {
			c.t.Fatal(err)
		}
		p := cl.GetStatus().GetPhase()
		return p == apiv1.CloneSucceeded || p == apiv1.CloneFailed
	})
	took := time.Since(began)
	if cl.GetStatus().GetPhase() != apiv1.CloneSucceeded {
		c.t.Fatalf("clone %s: %s, error %q", name, cl.GetStatus().GetPhase(), cl.GetStatus().GetError())
	}
	c.t.Logf("clone %s of %s %s into %s succeeded in %s", name, kind, source, target, took.Round(time.Millisecond))
	return took
}

// TestRBDSnapshotSurvivesNodeLoss is issue 34's acceptance for snapshots
// on RBD: a VM with an rbd volume writes a boot counter; an online
// snapshot is an RBD snapshot (no copy, no node data); more boots
// advance the counter; the node the snapshot was taken on is powered off
// and deleted for good; the snapshot is restored into the VM and the VM
// starts on the other node with the counter as at the snapshot; a clone
// of the snapshot and a clone of the running VM start from their points
// in time too; deleting the snapshot and the VMs leaves no image behind.
func TestRBDSnapshotSurvivesNodeLoss(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{nodes: 2, ceph: true})
	class, pool := c.rbdClassOwnPool("ceph")

	c.create(c.rbdCounterVM("db", class, "64Mi"))
	vmi, first, prev, wrote := c.bootAnywhere("db", "")
	if prev != "none" || wrote != "1" {
		t.Fatalf("first boot on %s: previous %q, wrote %q; want none and 1", first.Name, prev, wrote)
	}
	uid := c.vm("db").GetMetadata().GetUid()
	if imgs := rbdImages(t, pool, uid); len(imgs) != 1 {
		t.Fatalf("images of the VM: %v, want its one volume", imgs)
	}

	// Online: the guest runs; the test guest has no guest agent.
	snap, tookSnap := c.takeSnapshot("snap-1", "db")
	if st := snap.GetStatus(); st.GetNodeName() != "" || !strings.Contains(strings.Join(st.GetIndications(), ","), apiv1.IndicationOnline) ||
		len(st.GetIncludedVolumes()) != 1 {
		t.Errorf("snapshot status %v: want an online snapshot of data, held by no node", st)
	}
	ct, err := c.api.SnapshotContents.Get(c.ctx, &apiv1.GetSnapshotContentRequest{Key: c.key(snap.GetStatus().GetContentName())})
	if err != nil {
		t.Fatal(err)
	}
	atNode := ct.GetSpec().GetNodeName()
	if b := ct.GetStatus().GetVolumeBackups(); len(b) != 1 || !b[0].OnRBD() || b[0].GetPath() != "" {
		t.Fatalf("content backups %v: want one RBD snapshot", b)
	}
	t.Logf("RBD snapshot %s, taken by node %s", ct.GetStatus().GetVolumeBackups()[0].GetRbdSnapshot(), atNode)

	// More boots: the counter goes on.
	for want := 2; want <= 3; want++ {
		old := c.vmi("db").GetMetadata().GetUid()
		if _, err := c.api.VMs.Restart(c.ctx, &apiv1.RestartVirtualMachineRequest{Key: c.key("db")}); err != nil {
			t.Fatal(err)
		}
		_, n, _, wrote := c.bootAnywhere("db", old)
		if wrote != strconv.Itoa(want) {
			t.Fatalf("boot %d on %s wrote %q", want, n.Name, wrote)
		}
	}
	c.setRunning("db", false)

	// The node that took the snapshot goes for good.
	gone := c.nodeNamed(atNode)
	survivor := c.otherNode(gone)
	if err := c.PowerOff(gone.Node); err != nil {
		t.Fatal(err)
	}
	if _, err := c.api.Nodes.Delete(c.ctx, &apiv1.DeleteNodeRequest{Name: gone.Name}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, stateTimeout, "node "+gone.Name+" gone", func() bool {
		_, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: gone.Name})
		return err != nil
	})
	t.Logf("node %s (which took the snapshot) powered off and deleted; %s remains", gone.Name, survivor.Name)

	r, tookRestore := c.restoreInto("restore-1", "db", "snap-1")
	if r.GetStatus().GetNodeName() != "" {
		t.Errorf("restore of RBD snapshots involved node %q", r.GetStatus().GetNodeName())
	}
	c.setRunning("db", true)
	_, n, prev, wrote := c.bootAnywhere("db", vmi.GetMetadata().GetUid())
	if n != survivor || prev != testguest.PersistLinePrefix+"1" || wrote != "2" {
		t.Fatalf("after the restore: on %s, previous %q, wrote %q; want %s, the counter of the snapshot (1), then 2", n.Name, prev, wrote, survivor.Name)
	}
	t.Logf("figures: online snapshot of an rbd volume %s, restore onto another node after the first was deleted %s",
		tookSnap.Round(time.Millisecond), tookRestore.Round(time.Millisecond))

	// Clones: of the snapshot (instant: an RBD clone), and of the running
	// VM (an online snapshot, restored, then deleted).
	c.cloneOf("clone-1", apiv1.CloneSourceSnapshot, "snap-1", "db-copy")
	c.setRunning("db-copy", true)
	if _, _, prev, wrote := c.bootAnywhere("db-copy", ""); prev != testguest.PersistLinePrefix+"1" || wrote != "2" {
		t.Fatalf("clone of the snapshot: previous %q, wrote %q; want the snapshot's counter (1), then 2", prev, wrote)
	}
	c.cloneOf("clone-2", apiv1.CloneSourceVM, "db", "db-live")
	c.setRunning("db-live", true)
	if _, _, prev, wrote := c.bootAnywhere("db-live", ""); prev != testguest.PersistLinePrefix+"2" || wrote != "3" {
		t.Fatalf("clone of the running VM: previous %q, wrote %q; want db's counter (2), then 3", prev, wrote)
	}
	copyUID := c.vm("db-copy").GetMetadata().GetUid()
	liveUID := c.vm("db-live").GetMetadata().GetUid()
	if info := pool.rbd(t, "info", pool.name+"/vm-"+copyUID+"-vol-data"); !strings.Contains(string(info), "parent: ") {
		t.Errorf("the clone's image is no RBD clone:\n%s", info)
	}

	// Deleting: the snapshot's RBD snapshot (kept in Ceph's trash while
	// the clones read from it), then every VM's images go.
	rbdSnap := "snap-" + ct.GetMetadata().GetUid()
	if got := rbdSnapshotsNamed(t, pool, rbdSnap); len(got) != 1 || !strings.Contains(got[0], ".retired-") {
		t.Errorf("the snapshot's RBD snapshot is on %v: want the image the restore retired", got)
	}
	if _, err := c.api.Snapshots.Delete(c.ctx, &apiv1.DeleteSnapshotRequest{Key: c.key("snap-1")}); err != nil {
		t.Fatal(err)
	}
	snapDeleted := time.Now()
	testutil.Eventually(t, rbdTimeout, "the RBD snapshot removed", func() bool { return len(rbdSnapshotsNamed(t, pool, rbdSnap)) == 0 })
	t.Logf("the snapshot's RBD snapshot removed %s after the delete", time.Since(snapDeleted).Round(time.Millisecond))
	for _, name := range []string{"db", "db-copy", "db-live"} {
		if _, err := c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key(name)}); err != nil {
			t.Fatal(err)
		}
	}
	deleted := time.Now()
	testutil.Eventually(t, rbdTimeout, "the VMs' images removed", func() bool {
		return len(rbdImages(t, pool, uid))+len(rbdImages(t, pool, copyUID))+len(rbdImages(t, pool, liveUID)) == 0
	})
	t.Logf("the VMs' images (and the retired one) removed %s after the deletes", time.Since(deleted).Round(time.Millisecond))
}

// TestRBDSnapshotCostVsLocal measures a snapshot and a restore of a
// volume with 1 GiB written, on rbd and local, side by side on one node:
// offline (the rbd one by the server, no node involved), then online.
// The RBD ones are O(1) (a snapshot, a clone and two renames); the local
// ones copy the data.
func TestRBDSnapshotCostVsLocal(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{nodes: 1, ceph: true})
	class, pool := c.rbdClassOwnPool("ceph")
	n := c.nodes[0]
	c.create(c.rbdCounterVM("on-rbd", class, "1Gi"))
	c.create(c.rbdCounterVM("on-local", "", "1Gi"))
	for _, name := range []string{"on-rbd", "on-local"} {
		c.bootAnywhere(name, "")
		c.setRunning(name, false)
	}
	rbdUID, localUID := c.vm("on-rbd").GetMetadata().GetUid(), c.vm("on-local").GetMetadata().GetUid()
	pool.rbd(t, "bench", "--io-type", "write", "--io-size", "4M", "--io-total", "1G", "--io-pattern", "seq", pool.name+"/vm-"+rbdUID+"-vol-data")
	vmDir, err := nodedir.Layout{Root: n.NodeDir}.VMDir(localUID)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(nodedir.VolumesDir(vmDir), "data.qcow2")
	if out, err := exec.CommandContext(c.ctx, "qemu-io", "-f", "qcow2", "-c", "write -P 0xab 0 1G", file).CombinedOutput(); err != nil {
		t.Fatalf("qemu-io: %v %s", err, out)
	}
	type figure struct{ snapOff, restore, snapOn time.Duration }
	figs := map[string]*figure{}
	for _, name := range []string{"on-rbd", "on-local"} {
		f := &figure{}
		figs[name] = f
		_, f.snapOff = c.takeSnapshot(name+"-off", name)
		_, f.restore = c.restoreInto(name+"-r", name, name+"-off")
		c.setRunning(name, true)
		c.bootAnywhere(name, "")
		_, f.snapOn = c.takeSnapshot(name+"-on", name)
	}
	for _, name := range []string{"on-rbd", "on-local"} {
		f := figs[name]
		t.Logf("figures, 1 GiB written, %s: offline snapshot %s, restore %s, online snapshot %s", name,
			f.snapOff.Round(time.Millisecond), f.restore.Round(time.Millisecond), f.snapOn.Round(time.Millisecond))
	}
	// The local copies' times depend on the page cache (1.5-7.5 s for the
	// snapshot, measured); the RBD ones copy nothing, whatever the size.
	if r := figs["on-rbd"]; r.snapOff > 10*time.Second || r.restore > 10*time.Second || r.snapOn > 10*time.Second {
		t.Errorf("rbd: offline snapshot %s, restore %s, online snapshot %s: want seconds at most (no copy)", r.snapOff, r.restore, r.snapOn)
	}
}

// TestRBDAndLocalVolumesTogether: a VM with an rbd volume (its boot
// counter) and a local one is snapshotted online by its node (frozen if
// it could be, the local volume onto an overlay, the RBD snapshot taken,
// thawed, the file copied, the overlay committed), and restored by the
// node (the file) and the storage controller (the RBD snapshot) together.
func TestRBDAndLocalVolumesTogether(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{nodes: 1, ceph: true})
	class, _ := c.rbdClassOwnPool("ceph")
	n := c.nodes[0]
	vm := c.rbdCounterVM("mixed", class, "64Mi")
	spec := vm.Spec.Template.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, &apiv1.Disk{Name: "local", Disk: &apiv1.DiskTarget{Bus: "virtio"}})
	spec.Volumes = append(spec.Volumes, &apiv1.Volume{Name: "local", Persistent: &apiv1.PersistentVolume{Size: "16Mi"}})
	c.create(vm)
	if _, _, _, wrote := c.bootAnywhere("mixed", ""); wrote != "1" {
		t.Fatalf("first boot wrote %q", wrote)
	}
	s, _ := c.takeSnapshot("snap-m", "mixed")
	if st := s.GetStatus(); st.GetNodeName() != n.Name || len(st.GetIncludedVolumes()) != 2 {
		t.Fatalf("snapshot status %v: want both volumes, copies on %s", st, n.Name)
	}
	ct, err := c.api.SnapshotContents.Get(c.ctx, &apiv1.GetSnapshotContentRequest{Key: c.key(s.GetStatus().GetContentName())})
	if err != nil {
		t.Fatal(err)
	}
	var rbd, files int
	for _, b := range ct.GetStatus().GetVolumeBackups() {
		if b.OnRBD() {
			rbd++
		} else if b.OnNodeDisk() {
			files++
		}
	}
	if rbd != 1 || files != 1 {
		t.Fatalf("content backups %v: want one RBD snapshot and one file", ct.GetStatus().GetVolumeBackups())
	}
	// The overlay was committed: the domain reads its volume again.
	out, err := n.Virsh(c.ctx, "domblklist", c.domain("mixed"))
	if err != nil || strings.Contains(out, ".snap-") {
		t.Fatalf("domain disks after the snapshot: %v\n%s", err, out)
	}

	old := c.vmi("mixed").GetMetadata().GetUid()
	if _, err := c.api.VMs.Restart(c.ctx, &apiv1.RestartVirtualMachineRequest{Key: c.key("mixed")}); err != nil {
		t.Fatal(err)
	}
	if _, _, _, wrote := c.bootAnywhere("mixed", old); wrote != "2" {
		t.Fatalf("second boot wrote %q", wrote)
	}
	c.setRunning("mixed", false)
	r, _ := c.restoreInto("restore-m", "mixed", "snap-m")
	if st := r.GetStatus(); st.GetNodeName() != n.Name || !st.GetSwapped() || !st.GetStorageSwapped() || len(st.GetRestores()) != 2 {
		t.Fatalf("restore status %v: want both parts done", st)
	}
	c.setRunning("mixed", true)
	if _, _, prev, wrote := c.bootAnywhere("mixed", ""); prev != testguest.PersistLinePrefix+"1" || wrote != "2" {
		t.Fatalf("after the restore: previous %q, wrote %q; want the snapshot's 1, then 2", prev, wrote)
	}
}
