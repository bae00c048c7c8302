package nodeagent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// The snapshot and restore workers run here against the fake services
// (snapshots_fakeapi_test.go), the fake launcher, and real qemu-img on
// temporary files.

func needQemuImg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not found")
	}
}

func qemuImg(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("qemu-img", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img %v: %v: %s", args, err, out)
	}
	return string(out)
}

// snapUnit is a unit agent taking part in snapshots and restores.
type snapUnit struct {
	*unit
	contents *fakeContents
	restores *fakeRestores
	// vms are the VMs' uids the node looks restore targets up in.
	vms fakeVMUIDs
}

// fakeVMUIDs answers VirtualMachines.Get as the API answers a node: a
// VM's identity, by namespace/name; NotFound for any other.
type fakeVMUIDs map[string]string

func (f fakeVMUIDs) Get(_ context.Context, in *apiv1.GetVirtualMachineRequest, _ ...grpc.CallOption) (*apiv1.VirtualMachine, error) {
	k := in.GetKey()
	uid, ok := f[k.GetNamespace()+"/"+k.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "virtual machine %s/%s not found", k.GetNamespace(), k.GetName())
	}
	return &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: k.GetNamespace(), Name: k.GetName(), Uid: uid}}, nil
}

func newSnapUnit(t *testing.T) *snapUnit {
	t.Helper()
	needQemuImg(t)
	u := &snapUnit{unit: newUnit(t), contents: newFakeContents(), restores: newFakeRestores(), vms: fakeVMUIDs{}}
	u.a.opts.API.SnapshotContents, u.a.opts.API.Restores, u.a.opts.API.VMs = u.contents, u.restores, u.vms
	u.a.newDataRoles()
	return u
}

// volume makes VM vmUID's persistent volume name: a qcow2 of 1 MiB whose
// first bytes are fill.
func (u *snapUnit) volume(vmUID, name, fill string) string {
	u.t.Helper()
	dir, err := u.a.layout.VMDir(vmUID)
	if err != nil {
		u.t.Fatal(err)
	}
	if err := nodedir.MkdirTraversable(nodedir.VolumesDir(dir)); err != nil {
		u.t.Fatal(err)
	}
	raw := filepath.Join(u.t.TempDir(), "raw")
	if err := os.WriteFile(raw, []byte(strings.Repeat(fill, 1024)), 0o600); err != nil {
		u.t.Fatal(err)
	}
	qemuImg(u.t, "resize", "-q", "-f", "raw", raw, "1M")
	p := filepath.Join(nodedir.VolumesDir(dir), name+".qcow2")
	qemuImg(u.t, "convert", "-q", "-f", "raw", "-O", "qcow2", raw, p)
	return p
}

// content stores a content of VM vmUID on this node, as the snapshot
// controller makes it.
func (u *snapUnit) content(name, vmUID string, volumes ...string) *apiv1.VirtualMachineSnapshotContent {
	c := &apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: testUID("content-" + name),
			Labels: map[string]string{apiv1.LabelNodeName: testNode}, Finalizers: []string{apiv1.FinalizerSnapshotData}},
		Spec: &apiv1.VirtualMachineSnapshotContentSpec{
			SnapshotName: "snap", Source: &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: vmUID}},
			NodeName: testNode, Volumes: volumes,
		},
	}
	out := u.contents.put(c)
	u.syncSnaps()
	return out
}

// syncSnaps shows the informers what the fake services hold.
func (u *snapUnit) syncSnaps() {
	u.a.snaps.Cache().Fill(u.contents.all()...)
	u.a.restores.Cache().Fill(u.restores.all()...)
}

func (u *snapUnit) reconcileContent(name string) {
	u.t.Helper()
	u.syncSnaps()
	if _, err := u.a.snaps.Reconcile(context.Background(), "default/"+name); err != nil {
		u.t.Fatalf("reconcile content %s: %v", name, err)
	}
	u.syncSnaps()
}

func (u *snapUnit) getContent(name string) *apiv1.VirtualMachineSnapshotContent {
	c, _ := u.contents.get("default/" + name)
	return c
}

func (u *snapUnit) changeContent(name string, fn func(c *apiv1.VirtualMachineSnapshotContent)) {
	c, ok := u.contents.get("default/" + name)
	if !ok {
		u.t.Fatalf("no content %s", name)
	}
	fn(c)
	u.contents.put(c)
	u.syncSnaps()
}

// wantSameData fails unless the two images hold the same guest data.
func wantSameData(t *testing.T, a, b string) {
	t.Helper()
	qemuImg(t, "compare", "-U", a, b)
}

func TestOfflineSnapshotCopiesTheVolumes(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-offline")
	live := u.volume(vm, "data", "A")
	u.content("c1", vm, "data", "never-made")
	u.reconcileContent("c1")

	c := u.getContent("c1")
	st := c.GetStatus()
	if st.GetPhase() != apiv1.SnapshotSucceeded || !st.GetReadyToUse() || st.GetCreationTime() == nil || st.GetError() != "" {
		t.Fatalf("status = %v, want Succeeded and ready", st)
	}
	if len(st.GetIndications()) != 0 {
		t.Errorf("indications %v for an offline snapshot", st.GetIndications())
	}
	copyPath, _ := u.a.layout.SnapshotVolumePath(c.Metadata.Uid, "data")
	if len(st.GetVolumeBackups()) != 1 {
		t.Fatalf("volume backups = %v, want only data (never-made is skipped)", st.GetVolumeBackups())
	}
	b := st.GetVolumeBackups()[0]
	fi, err := os.Stat(copyPath)
	if err != nil {
		t.Fatal(err)
	}
	if b.GetVolumeName() != "data" || b.GetPath() != copyPath || b.GetSizeBytes() != fi.Size() || b.GetVirtualSizeBytes() != 1<<20 {
		t.Errorf("backup = %v, want %s of %d bytes, virtual 1 MiB", b, copyPath, fi.Size())
	}
	wantSameData(t, live, copyPath)
	qemuImg(t, "check", "-q", copyPath)
	if n := u.fake.Count("SnapshotDisks"); n != 0 {
		t.Errorf("%d launcher snapshots for a VM that does not run", n)
	}
	// The first write said it was under way.
	if w := u.contents.writes[0].GetStatus(); w.GetPhase() != apiv1.SnapshotInProgress {
		t.Errorf("first write %v, want InProgress", w)
	}
	// A Succeeded content is left alone.
	before := len(u.contents.writes)
	u.reconcileContent("c1")
	if len(u.contents.writes) != before {
		t.Error("a Succeeded content was written again")
	}
}

// An agent killed mid-copy finds the content InProgress and a partial
// copy: it starts over.
func TestSnapshotStartsOverAfterACrash(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-crash")
	live := u.volume(vm, "data", "B")
	c := u.content("c1", vm, "data")
	u.changeContent("c1", func(c *apiv1.VirtualMachineSnapshotContent) {
		c.Status = &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotInProgress, Message: "copying volume data (1/1)"}
	})
	copyPath, _ := u.a.layout.SnapshotVolumePath(c.Metadata.Uid, "data")
	if err := os.MkdirAll(filepath.Dir(copyPath), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{copyPath + ".tmp", copyPath} {
		if err := os.WriteFile(p, []byte("torn"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	u.reconcileContent("c1")
	if st := u.getContent("c1").GetStatus(); st.GetPhase() != apiv1.SnapshotSucceeded {
		t.Fatalf("status = %v", st)
	}
	wantSameData(t, live, copyPath)
	if _, err := os.Stat(copyPath + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("partial copy left: %v", err)
	}
}

// runGuest starts VMI name of VM vmUID on the fake launcher.
func (u *snapUnit) runGuest(name, vmUID string) {
	u.t.Helper()
	u.create(name, ownedBy(vmUID))
	u.mustReconcile(name)
	if v := u.vmis.get(name); v.GetStatus().GetPhase() != apiv1.PhaseRunning {
		u.t.Fatalf("VMI %s is %s", name, v.GetStatus().GetPhase())
	}
}

func TestOnlineSnapshotThroughTheLauncher(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-online")
	live := u.volume(vm, "data", "C")
	u.runGuest("web", vm)
	c := u.content("c1", vm, "data")
	u.reconcileContent("c1")

	st := u.getContent("c1").GetStatus()
	if st.GetPhase() != apiv1.SnapshotSucceeded {
		t.Fatalf("status = %v", st)
	}
	if want := []string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent}; !slices.Equal(st.GetIndications(), want) {
		t.Errorf("indications = %v, want %v", st.GetIndications(), want)
	}
	if u.fake.Count("SnapshotDisks") != 1 || u.fake.Count("CommitDisks") != 1 {
		t.Errorf("launcher calls %v, want one SnapshotDisks and one CommitDisks", u.tl.events())
	}
	if u.tl.index("launcher:SnapshotDisks") > u.tl.index("launcher:CommitDisks") {
		t.Error("committed before the snapshot")
	}
	d, _ := u.fake.Domain(domainOf("web"))
	if len(d.Overlays) != 0 {
		t.Errorf("disks still on overlays: %v", d.Overlays)
	}
	if _, err := os.Stat(live + ".snap-" + c.Metadata.Uid); !os.IsNotExist(err) {
		t.Errorf("overlay left: %v", err)
	}
	copyPath, _ := u.a.layout.SnapshotVolumePath(c.Metadata.Uid, "data")
	wantSameData(t, live, copyPath)
}

// A migrating instance is not snapshotted (KubeVirt's refusal); the
// content waits.
func TestOnlineSnapshotWaitsForAMigration(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-mig")
	u.volume(vm, "data", "D")
	u.runGuest("web", vm)
	v := u.vmis.get("web")
	v.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "m1", SourceNode: testNode, TargetNode: "node2"}
	u.vmis.put(v)
	u.sync()
	u.content("c1", vm, "data")
	u.syncSnaps()
	_, err := u.a.snaps.Reconcile(context.Background(), "default/c1")
	if err == nil || !strings.Contains(err.Error(), "during migration") {
		t.Fatalf("reconcile = %v, want the migration refusal", err)
	}
	if u.fake.Count("SnapshotDisks") != 0 {
		t.Error("snapshot taken during a migration")
	}
}

// An abandoned content whose online snapshot was cut short (the agent
// died after SnapshotDisks) has its overlay committed, its data removed
// and the node's finalizer dropped.
func TestAbandonedContentIsUndone(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-abandon")
	live := u.volume(vm, "data", "E")
	u.runGuest("web", vm)
	c := u.content("c1", vm, "data")
	overlay := live + ".snap-" + c.Metadata.Uid
	e := u.a.launchers.Get("default/web")
	if _, err := e.Client.SnapshotDisks(context.Background(), &launcherpb.SnapshotDisksRequest{
		Disks: []*launcherpb.SnapshotDisk{{Path: live, OverlayPath: overlay}}}); err != nil {
		t.Fatal(err)
	}
	dir, _ := u.a.layout.SnapshotDir(c.Metadata.Uid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	u.changeContent("c1", func(c *apiv1.VirtualMachineSnapshotContent) {
		c.Spec.Abandoned = true
		c.Status = &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotInProgress}
	})
	u.reconcileContent("c1")

	got := u.getContent("c1")
	if got.GetStatus().GetPhase() != apiv1.SnapshotFailed || got.GetStatus().GetError() != "abandoned" {
		t.Errorf("status = %v, want Failed abandoned", got.GetStatus())
	}
	if slices.Contains(got.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshotData) {
		t.Error("the node's finalizer is still there")
	}
	if d, _ := u.fake.Domain(domainOf("web")); len(d.Overlays) != 0 {
		t.Errorf("disk still on the overlay: %v", d.Overlays)
	}
	for _, p := range []string{overlay, dir} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", p, err)
		}
	}
}

// Deleting a Succeeded content removes its data, then the finalizer
// (and with it the content).
func TestDeletedContentReleasesItsData(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-delete")
	u.volume(vm, "data", "F")
	c := u.content("c1", vm, "data")
	u.reconcileContent("c1")
	dir, _ := u.a.layout.SnapshotDir(c.Metadata.Uid)
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
	u.changeContent("c1", func(c *apiv1.VirtualMachineSnapshotContent) { c.Metadata.DeletionTimestamp = timestamppb.Now() })
	u.reconcileContent("c1")
	if _, ok := u.contents.get("default/c1"); ok {
		t.Error("content still there: the node's finalizer was not dropped")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("snapshot data left: %v", err)
	}
}

// The collector removes the directories of contents this node no longer
// has, and nothing else.
func TestSnapshotDirGCRemovesOrphansOnly(t *testing.T) {
	u := newSnapUnit(t)
	// Stored, not yet shown to the informer.
	kept := u.contents.put(&apiv1.VirtualMachineSnapshotContent{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "c1",
		Uid: testUID("content-c1"), Labels: map[string]string{apiv1.LabelNodeName: testNode}}})
	orphan := testUID("content-gone")
	var dirs []string
	for _, name := range []string{kept.Metadata.Uid, orphan, "not-a-uid"} {
		d := filepath.Join(u.a.layout.SnapshotsDir(), name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	// Before the informer has synced nothing is removed.
	u.a.snaps.CollectDirs(context.Background())
	if _, err := os.Stat(dirs[1]); err != nil {
		t.Fatalf("removed before the informer synced: %v", err)
	}
	u.syncSnaps() // Fill marks the informer synced
	u.a.snaps.CollectDirs(context.Background())
	for i, want := range []bool{true, false, true} {
		_, err := os.Stat(dirs[i])
		if (err == nil) != want {
			t.Errorf("%s: exists=%v, want %v", dirs[i], err == nil, want)
		}
	}
}
