package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// snapshotOf takes an offline snapshot of VM vmUID's volumes and returns
// the restores a restore controller would list from it.
func (u *snapUnit) snapshotOf(name, vmUID string, volumes ...string) []*apiv1.VolumeRestore {
	u.t.Helper()
	u.content(name, vmUID, volumes...)
	u.reconcileContent(name)
	return u.restoresOf(u.getContent(name))
}

// restoresOf are the restores a restore controller lists from content c:
// its volume backups, of which it must have one at least.
func (u *snapUnit) restoresOf(c *apiv1.VirtualMachineSnapshotContent) []*apiv1.VolumeRestore {
	u.t.Helper()
	var out []*apiv1.VolumeRestore
	for _, b := range c.GetStatus().GetVolumeBackups() {
		out = append(out, &apiv1.VolumeRestore{VolumeName: b.GetVolumeName(), SourcePath: b.GetPath()})
	}
	if len(out) == 0 {
		u.t.Fatalf("content %s has no volume backups: %v", c.GetMetadata().GetName(), c.GetStatus())
	}
	return out
}

func (u *snapUnit) restore(name, targetUID string, vols []*apiv1.VolumeRestore) *apiv1.VirtualMachineRestore {
	// The target exists, as the restore controller made or found it,
	// unless the test said which VM web is.
	if _, ok := u.vms["default/web"]; !ok {
		u.vms["default/web"] = targetUID
	}
	out := u.restores.put(&apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Uid: testUID("restore-" + name),
			Labels: map[string]string{apiv1.LabelNodeName: testNode}, Finalizers: []string{apiv1.FinalizerRestoreData}},
		Spec:   &apiv1.VirtualMachineRestoreSpec{Target: "web", Snapshot: "snap"},
		Status: &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreStaging, TargetUid: targetUID, NodeName: testNode, Restores: vols},
	})
	u.syncSnaps()
	return out
}

func (u *snapUnit) reconcileRestore(name string) error {
	u.t.Helper()
	u.syncSnaps()
	_, err := u.a.restores.Reconcile(context.Background(), "default/"+name)
	u.syncSnaps()
	return err
}

func (u *snapUnit) getRestore(name string) *apiv1.VirtualMachineRestore {
	r, _ := u.restores.get("default/" + name)
	return r
}

func (u *snapUnit) changeRestore(name string, fn func(r *apiv1.VirtualMachineRestore)) {
	r, _ := u.restores.get("default/" + name)
	fn(r)
	u.restores.put(r)
	u.syncSnaps()
}

func TestRestoreStagesThenSwaps(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-restore")
	live := u.volume(vm, "data", "A")
	vols := u.snapshotOf("c1", vm, "data")
	// After the snapshot the VM changed: new data, and a volume added.
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	u.volume(vm, "data", "Z")
	extra := u.volume(vm, "extra", "X")
	r := u.restore("r1", vm, vols)

	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	st := u.getRestore("r1").GetStatus()
	if !st.GetStaged() || st.GetError() != "" {
		t.Fatalf("status = %v, want staged", st)
	}
	// Progress: what it copies, then that it is done.
	var msgs []string
	for _, w := range u.restores.writes {
		msgs = append(msgs, w.GetStatus().GetMessage())
	}
	if want := []string{"copying volume data (1/1)", "1 volumes staged"}; !slices.Equal(msgs, want) {
		t.Errorf("progress written %q, want %q", msgs, want)
	}
	staged := live + ".restore-" + r.Metadata.Uid
	wantSameData(t, vols[0].SourcePath, staged)
	// Until the commit point the live volumes are untouched.
	if _, err := os.Stat(extra); err != nil {
		t.Fatal(err)
	}

	u.changeRestore("r1", func(r *apiv1.VirtualMachineRestore) { r.Status.Phase = apiv1.RestoreCommitting })
	// A domain of the target running here holds the swap back.
	u.runGuest("web", vm)
	if err := u.reconcileRestore("r1"); err == nil {
		t.Fatal("swapped under a running guest")
	}
	if _, err := os.Stat(staged); err != nil {
		t.Fatalf("staged copy gone while refused: %v", err)
	}
	u.fake.SetDomainState(domainOf("web"), "Shutoff", "Shutdown")

	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	if !u.getRestore("r1").GetStatus().GetSwapped() {
		t.Fatalf("status = %v, want swapped", u.getRestore("r1").GetStatus())
	}
	wantSameData(t, vols[0].SourcePath, live)
	for _, p := range []string{staged, extra} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left after the swap: %v", p, err)
		}
	}
	// Again, as after an agent killed before it wrote swapped: the
	// renames are done, nothing changes.
	u.changeRestore("r1", func(r *apiv1.VirtualMachineRestore) { r.Status.Swapped = false })
	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	wantSameData(t, vols[0].SourcePath, live)

	// Succeeded: the node lets go.
	u.changeRestore("r1", func(r *apiv1.VirtualMachineRestore) { r.Status.Phase = apiv1.RestoreSucceeded })
	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(u.getRestore("r1").GetMetadata().GetFinalizers(), apiv1.FinalizerRestoreData) {
		t.Error("the node's finalizer is still there")
	}
}

// A failed restore (or one deleted before the swap) has its staged
// copies removed, a copy half written included, and the live volumes
// untouched.
func TestFailedRestoreDropsTheStagedCopies(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-fail")
	live := u.volume(vm, "data", "A")
	vols := u.snapshotOf("c1", vm, "data")
	r := u.restore("r1", vm, vols)
	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	staged := live + ".restore-" + r.Metadata.Uid
	if err := os.WriteFile(staged+".tmp", []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}
	u.changeRestore("r1", func(r *apiv1.VirtualMachineRestore) {
		r.Status.Phase = apiv1.RestoreFailed
		r.Metadata.DeletionTimestamp = timestamppb.Now()
	})
	if err := u.reconcileRestore("r1"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{staged, staged + ".tmp"} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s left: %v", p, err)
		}
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("live volume: %v", err)
	}
	if _, ok := u.restores.get("default/r1"); ok {
		t.Error("restore still there: the node's finalizer was not dropped")
	}
}

// A source path from the API that is no snapshot volume of this node is
// refused with an error on the restore, and nothing is read.
func TestRestoreRefusesForeignSourcePaths(t *testing.T) {
	u := newSnapUnit(t)
	vm := testUID("vm-foreign")
	secret := filepath.Join(t.TempDir(), "secret.qcow2")
	qemuImg(t, "create", "-q", "-f", "qcow2", secret, "1M")
	for i, src := range []string{secret, filepath.Join(u.a.layout.Root, "vms", vm, "volumes", "data.qcow2"),
		filepath.Join(u.a.layout.SnapshotsDir(), testUID("c"), "..", "..", "state.db")} {
		name := "r" + string(rune('a'+i))
		u.restore(name, vm, []*apiv1.VolumeRestore{{VolumeName: "data", SourcePath: src}})
		if err := u.reconcileRestore(name); err != nil {
			t.Fatal(err)
		}
		st := u.getRestore(name).GetStatus()
		if st.GetError() == "" || st.GetStaged() {
			t.Errorf("source %s: status %v, want an error", src, st)
		}
	}
	dir, _ := u.a.layout.VMDir(vm)
	if entries, _ := os.ReadDir(nodedir.VolumesDir(dir)); len(entries) != 0 {
		t.Errorf("files staged: %v", entries)
	}
}
