package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/restore"
)

// Issue 33 (defect 7): snapshots, restores and clones name VMs and
// snapshots by uid and path in objects other parties write (a content's
// source, a restore's target and source paths). Each test here writes
// such an object as a hostile or mistaken writer would, straight into
// what the node watches, and checks that the node never crosses a
// namespace: it reads and writes only the volumes of the object's own
// namespace.

// ownVM makes VM namespace/web's directory, as the node made it when the
// VM first ran here, with one persistent volume "data" filled with fill.
func (u *snapUnit) ownVM(namespace, vmUID, fill string) string {
	u.t.Helper()
	if err := u.a.layout.EnsureVMDir(vmUID, namespace, "web"); err != nil {
		u.t.Fatal(err)
	}
	return u.volume(vmUID, "data", fill)
}

// contentIn stores a content in namespace ns of VM vmUID, named web in
// sourceNS (ns, as the snapshot controller of ns makes it; another, as a
// hostile writer could claim), and takes it.
func (u *snapUnit) contentIn(ns, name, sourceNS, vmUID string, volumes ...string) *apiv1.VirtualMachineSnapshotContent {
	u.t.Helper()
	u.contents.put(&apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name, Uid: testUID("content-" + ns + "-" + name),
			Labels: map[string]string{apiv1.LabelNodeName: testNode}, Finalizers: []string{apiv1.FinalizerSnapshotData}},
		Spec: &apiv1.VirtualMachineSnapshotContentSpec{
			SnapshotName: "snap", Source: &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: sourceNS, Name: "web", Uid: vmUID}},
			NodeName: testNode, Volumes: volumes,
		},
	})
	u.syncSnaps()
	if _, err := u.a.snaps.Reconcile(context.Background(), ns+"/"+name); err != nil {
		u.t.Fatalf("reconcile content %s/%s: %v", ns, name, err)
	}
	u.syncSnaps()
	c, _ := u.contents.get(ns + "/" + name)
	return c
}

// A content of namespace default whose source uid is namespace other's
// VM copies nothing of it and fails, whether its spec names the VM in
// default or claims other: the content's own namespace is the one.
func TestSnapshotCopiesOnlyItsNamespacesVM(t *testing.T) {
	u := newSnapUnit(t)
	victim := testUID("vm-other-web")
	u.ownVM("other", victim, "S")

	for _, claimed := range []string{"default", "other"} {
		c := u.contentIn("default", "steal-as-"+claimed, claimed, victim, "data")
		st := c.GetStatus()
		if st.GetPhase() != apiv1.SnapshotFailed || !strings.Contains(st.GetError(), "other/web") {
			t.Errorf("source claimed in %s: content status %v, want Failed naming the VM's namespace", claimed, st)
		}
		if len(st.GetVolumeBackups()) != 0 {
			t.Errorf("source claimed in %s: volume backups %v, want none", claimed, st.GetVolumeBackups())
		}
		dir, _ := u.a.layout.SnapshotDir(c.GetMetadata().GetUid())
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("source claimed in %s: snapshot directory holds %v, want nothing of another namespace's VM", claimed, entries)
		}
	}

	// The same content in the VM's own namespace copies it.
	own := u.contentIn("other", "own", "other", victim, "data")
	if own.GetStatus().GetPhase() != apiv1.SnapshotSucceeded {
		t.Fatalf("content in the VM's namespace: %v", own.GetStatus())
	}
}

// A restore of namespace default whose source paths are namespace
// other's snapshot copies nothing of it; the same restore of a snapshot
// of its own namespace stages.
func TestRestoreReadsOnlyItsNamespacesSnapshots(t *testing.T) {
	u := newSnapUnit(t)
	secret := testUID("vm-other-web")
	u.ownVM("other", secret, "S")
	theirs := u.contentIn("other", "secret", "other", secret, "data")
	mine := testUID("vm-default-web")
	u.ownVM("default", mine, "M")
	ours := u.contentIn("default", "mine", "default", mine, "data")

	u.restore("steal", mine, u.restoresOf(theirs))
	u.wantRestoreRefused("steal", mine, "namespace other", "the snapshot's namespace")

	u.restore("own", mine, u.restoresOf(ours))
	if err := u.reconcileRestore("own"); err != nil {
		t.Fatal(err)
	}
	if st := u.getRestore("own").GetStatus(); !st.GetStaged() || st.GetError() != "" {
		t.Errorf("restore of its own namespace's snapshot: %v, want staged", st)
	}
}

// Until the node's snapshot contents are listed, a restore waits rather
// than fails: whose a snapshot is cannot be told yet.
func TestRestoreWaitsForTheContentsListing(t *testing.T) {
	u := newSnapUnit(t)
	mine := testUID("vm-default-web")
	u.ownVM("default", mine, "M")
	ours := u.contentIn("default", "mine", "default", mine, "data")
	u.restore("early", mine, u.restoresOf(ours))
	u.a.restores = newRestoresWithContents(u, unsyncedContents{})
	u.syncSnaps()
	if _, err := u.a.restores.Reconcile(context.Background(), "default/early"); err == nil {
		t.Fatal("reconcile before the contents listing: no error, want one (retried with backoff)")
	}
	if st := u.getRestore("early").GetStatus(); st.GetError() != "" || st.GetStaged() {
		t.Errorf("restore status %v, want untouched while the contents are unknown", st)
	}
}

// A restore whose target uid is namespace other's VM stages nothing into
// it and leaves its volumes alone.
func TestRestoreWritesOnlyItsNamespacesVM(t *testing.T) {
	u := newSnapUnit(t)
	victim := testUID("vm-other-web")
	victimData := u.ownVM("other", victim, "V")
	before, err := os.ReadFile(victimData)
	if err != nil {
		t.Fatal(err)
	}
	mine := testUID("vm-default-web")
	u.ownVM("default", mine, "M")
	ours := u.contentIn("default", "mine", "default", mine, "data")

	u.restore("overwrite", victim, u.restoresOf(ours))
	u.wantRestoreRefused("overwrite", victim, "other/web", "the target's namespace")
	// Committing is refused too: the swap would rename over its volume.
	u.changeRestore("overwrite", func(r *apiv1.VirtualMachineRestore) {
		r.Status.Phase, r.Status.Staged, r.Status.Error = apiv1.RestoreCommitting, true, ""
	})
	if err := u.reconcileRestore("overwrite"); err == nil {
		t.Error("swap into another namespace's VM: no error")
	}
	after, err := os.ReadFile(victimData)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != string(before) {
		t.Error("another namespace's volume changed")
	}
}

// A restore whose target uid is not its target VM's, here another
// namespace's VM with no files on this node yet (so no vm.json to
// compare), is refused before staging writes a directory: otherwise its
// vm.json would claim that VM's directory for this namespace, and the
// VM could no longer start here.
func TestRestoreTargetIsItsOwnVM(t *testing.T) {
	u := newSnapUnit(t)
	mine := testUID("vm-default-web")
	u.ownVM("default", mine, "M")
	ours := u.contentIn("default", "mine", "default", mine, "data")
	elsewhere := testUID("vm-other-web-not-here")
	u.vms["default/web"] = mine

	u.restore("claim", elsewhere, u.restoresOf(ours))
	u.wantRestoreRefused("claim", elsewhere, "is not VM default/web", "the target's uid")
	dir, _ := u.a.layout.VMDir(elsewhere)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the other VM's directory was made (%v): it now says it is default/web's", err)
	}

	// A target that does not exist (deleted meanwhile) is refused too.
	delete(u.vms, "default/web")
	u.restore("gone", mine, u.restoresOf(ours))
	delete(u.vms, "default/web")
	u.wantRestoreRefused("gone", mine, "does not exist", "the missing target")
}

// wantRestoreRefused reconciles restore name and fails unless it failed
// saying says (which names why: the namespace of what it crossed to)
// and staged nothing into VM vmUID's directory.
func (u *snapUnit) wantRestoreRefused(name, vmUID, says, why string) {
	u.t.Helper()
	if err := u.reconcileRestore(name); err != nil {
		u.t.Fatal(err)
	}
	if st := u.getRestore(name).GetStatus(); st.GetStaged() || !strings.Contains(st.GetError(), says) {
		u.t.Errorf("restore %s status %v, want an error naming %s", name, st, why)
	}
	dir, _ := u.a.layout.VMDir(vmUID)
	if staged, _ := filepath.Glob(filepath.Join(nodedir.VolumesDir(dir), "*.restore-*")); len(staged) != 0 {
		u.t.Errorf("restore %s staged %v across namespaces", name, staged)
	}
}

// unsyncedContents is a snapshot worker whose first listing is not in.
type unsyncedContents struct{}

func (unsyncedContents) Owner(string) (string, bool, bool) { return "", false, false }

// newRestoresWithContents is u's restore worker with contents in place
// of the agent's snapshot worker.
func newRestoresWithContents(u *snapUnit, contents restore.Contents) *restore.Restores {
	o := u.a.opts
	return restore.New(restore.Options{NodeName: o.NodeName, API: u.restores, Layout: u.a.layout, Copier: o.Copier,
		Domains: u.a.handler, Contents: contents, VMs: u.vms, CallTimeout: o.Timing.CallTimeout, Logger: u.a.log})
}

// An instance in namespace default whose owner uid is namespace other's
// VM fails before a launcher starts: that VM's volume is never attached.
func TestInstanceGetsOnlyItsNamespacesVolumes(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	victim := testUID("vm-other-pv")
	if err := a.layout.EnsureVMDir(victim, "other", "pv"); err != nil {
		t.Fatal(err)
	}
	vol := filepath.Join(nodedir.VolumesDir(h.vmDir(victim)), "data.qcow2")
	if err := nodedir.MkdirTraversable(filepath.Dir(vol)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(vol, []byte("other's data"), 0o600); err != nil {
		t.Fatal(err)
	}
	devices := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
	vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}}}
	h.createVMI("pv", ownedBy(victim), withVolumes(devices, vols))
	h.synced(a, "pv")
	_, _ = a.Reconcile(h.ctx, "default/pv")
	v := h.getVMI("pv")
	if v.GetStatus().GetPhase() != apiv1.PhaseFailed {
		t.Errorf("phase %s, conditions %v: want Failed", v.GetStatus().GetPhase(), v.GetStatus().GetConditions())
	}
	if !strings.Contains(v.String(), "other/pv") {
		t.Errorf("status %v does not name the VM the directory belongs to", v.GetStatus())
	}
	if n := h.fake.Count("Launch"); n != 0 {
		t.Errorf("%d launchers started with another namespace's volume", n)
	}
	if b, _ := os.ReadFile(vol); string(b) != "other's data" {
		t.Errorf("the other namespace's volume is now %q", b)
	}
}
