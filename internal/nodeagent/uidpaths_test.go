package nodeagent

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/uuid"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// The attacks of issue 13: a VMI written straight into etcd (past the
// API's validation) whose uid, or whose VM's uid, is a path. The node
// agent builds directories from both, so such a VMI made it write outside
// its data dir and delete another directory on cleanup; an empty uid
// removed <node>/vmis whole, the disks of every guest on the node with it.

// testUID is a uid as the store makes them (a UUID), the same for the same
// seed: the node refuses any other.
func testUID(seed string) string { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(seed)).String() }

// vmiDir and vmDir are the layout's directories of a VMI and a VM.
func (h *harness) vmiDir(uid string) string {
	h.t.Helper()
	return h.mustPath(h.layout().VMIDir(uid))
}

func (h *harness) vmDir(uid string) string {
	h.t.Helper()
	return h.mustPath(h.layout().VMDir(uid))
}

// victimDir is a directory beside the node data dir, with one file that
// must survive, and the relative path that reaches it from dir.
func victimDir(t *testing.T, from string) (victim, rel string) {
	t.Helper()
	victim = t.TempDir()
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(from, victim)
	if err != nil {
		t.Fatal(err)
	}
	return victim, rel
}

// untouched fails unless victim holds exactly its file, unchanged.
func untouched(t *testing.T, victim string) {
	t.Helper()
	ents, err := os.ReadDir(victim)
	if err != nil {
		t.Fatalf("victim directory: %v", err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"keep"}) {
		t.Errorf("the agent wrote into a directory outside its data dir: %s holds %v", victim, names)
	}
	if b, err := os.ReadFile(filepath.Join(victim, "keep")); err != nil || string(b) != "precious" {
		t.Errorf("the agent removed or changed a file outside its data dir: %q, %v", b, err)
	}
}

// storeUID rewrites name's uid in the store, as a write straight into
// etcd would: the store keeps whatever uid an update carries.
func (h *harness) storeUID(name, uid string) {
	h.t.Helper()
	h.updateVMI(name, func(v *apiv1.VirtualMachineInstance) { v.Metadata.Uid = uid })
}

// reconcileAnyway runs one handler pass and ignores its error: the
// attacks are judged by what is on disk, whatever the pass returned.
func (h *harness) reconcileAnyway(a *Agent, name string) {
	h.t.Helper()
	h.synced(a, name)
	_, _ = a.Reconcile(h.ctx, "default/"+name)
}

func TestTraversalUIDNeverTouchesDisk(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	victim, rel := victimDir(t, filepath.Join(h.nodeDir, "vmis"))
	devices := []*apiv1.Disk{{Name: "seed", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}}}
	vols := []*apiv1.Volume{{Name: "seed", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: "#cloud-config\n"}}}
	h.createVMI("evil", withGrace(0), withVolumes(devices, vols))
	h.storeUID("evil", rel)

	h.reconcileAnyway(a, "evil")
	untouched(t, victim)
	if n := h.fake.Count("Launch"); n != 0 {
		t.Errorf("a launcher was started for a VMI whose uid is a path (%d launches)", n)
	}
	if h.record("evil") != nil {
		t.Error("a state record was kept for a VMI whose uid is a path")
	}

	// Its end: cleanup must not remove the directory the uid names.
	h.deleteVMI("evil")
	for range 3 {
		h.reconcileAnyway(a, "evil")
	}
	untouched(t, victim)
}

func TestTraversalVMUIDNeverTouchesDisk(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	victim, rel := victimDir(t, filepath.Join(h.nodeDir, "vms"))
	devices := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
	vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}}}
	h.createVMI("evil", withGrace(0), ownedBy(rel), withVolumes(devices, vols))

	h.reconcileAnyway(a, "evil")
	untouched(t, victim)
	if n := h.fake.Count("Launch"); n != 0 {
		t.Errorf("a launcher was started for a VMI whose VM uid is a path (%d launches)", n)
	}
	h.deleteVMI("evil")
	for range 3 {
		h.reconcileAnyway(a, "evil")
	}
	a.gcVMDirs(h.ctx)
	untouched(t, victim)
}

// An empty uid named <node>/vmis itself: cleaning up after such a VMI
// removed the directories of every other VMI on the node.
func TestEmptyUIDKeepsOtherVMIsFiles(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	good := h.startVMI(a, "good")
	if got := h.phase("good"); got != apiv1.PhaseRunning {
		t.Fatalf("good VMI %s", got)
	}
	goodDir := h.vmiDir(good.Metadata.Uid)
	if _, err := os.Stat(nodedir.DisksDir(goodDir)); err != nil {
		t.Fatalf("good VMI's files: %v", err)
	}

	h.createVMI("empty", withGrace(0))
	h.storeUID("empty", "")
	h.reconcileAnyway(a, "empty")
	h.deleteVMI("empty")
	for range 3 {
		h.reconcileAnyway(a, "empty")
	}
	if _, err := os.Stat(nodedir.DisksDir(goodDir)); err != nil {
		t.Fatalf("cleaning up after a VMI with an empty uid removed another VMI's files: %v", err)
	}
	if n := h.fake.Count("Launch"); n != 1 {
		t.Errorf("%d launches, want 1 (the good VMI's only)", n)
	}
}

// A state record whose directory is not its VMI's own (written by an
// older agent for a uid that was a path, or under another data dir): the
// domain still goes and the record is dropped, but the directory it names
// is left alone.
func TestForeignRecordDirIsNotRemoved(t *testing.T) {
	h := newHarness(t)
	a := h.directAgent()
	victim, _ := victimDir(t, h.nodeDir)
	h.startVMI(a, "old", withGrace(0))
	rec := h.record("old")
	if rec == nil {
		t.Fatal("no record")
	}
	rec.Dir = victim
	if err := h.db.PutVMI(rec); err != nil {
		t.Fatal(err)
	}
	h.deleteVMI("old")
	for range 3 {
		h.reconcileAnyway(a, "old")
	}
	untouched(t, victim)
	if _, ok := h.fake.Domain(domainOf("old")); ok {
		t.Error("the domain of a record with a foreign directory was kept")
	}
	if h.record("old") != nil {
		t.Error("the record with a foreign directory was kept")
	}
}
