package nodedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	vmiUID = "0b6c8f3e-1111-4aaa-8bbb-000000000001"
	vmUID  = "0b6c8f3e-2222-4aaa-8bbb-000000000002"
)

// mustFor returns a check of a path-or-error result that fails t.
func mustFor(t *testing.T) func(string, error) string {
	return func(p string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// The layout is on disk across agent versions: a new agent must find what
// an old one wrote, so the names are pinned here, spelled out.
func TestLayoutPaths(t *testing.T) {
	must := mustFor(t)
	l := Layout{Root: "/node"}
	vmiDir := must(l.VMIDir(vmiUID))
	vmDir := must(l.VMDir(vmUID))
	for _, p := range []struct{ got, want string }{
		{l.StateDBPath(), "/node/state.db"},
		{l.VMIsDir(), "/node/vmis"},
		{vmiDir, "/node/vmis/" + vmiUID},
		{ConsoleLogPath(vmiDir), "/node/vmis/" + vmiUID + "/console.log"},
		{DisksDir(vmiDir), "/node/vmis/" + vmiUID + "/disks"},
		{VolumesDir(vmiDir), "/node/vmis/" + vmiUID + "/volumes"},
		{l.VMsDir(), "/node/vms"},
		{vmDir, "/node/vms/" + vmUID},
		{VolumesDir(vmDir), "/node/vms/" + vmUID + "/volumes"},
		{must(l.KeptLogsDir(vmUID)), "/node/vms/" + vmUID + "/console"},
		{ConsoleLogPath(must(l.KeptLogDir(vmUID, vmiUID))), "/node/vms/" + vmUID + "/console/" + vmiUID + "/console.log"},
		{must(FileIn("/node/vmis/x/disks", "root.qcow2")), "/node/vmis/x/disks/root.qcow2"},
		{l.SnapshotsDir(), "/node/snapshots"},
		{must(l.SnapshotDir(vmUID)), "/node/snapshots/" + vmUID},
		{must(l.SnapshotVolumePath(vmUID, "data")), "/node/snapshots/" + vmUID + "/data.qcow2"},
	} {
		if p.got != p.want {
			t.Errorf("got %s, want %s", p.got, p.want)
		}
	}
}

// A uid is a directory name only if it is a UUID: anything else, a path
// above all, is an error and never a path.
func TestBadUIDIsNeverAPath(t *testing.T) {
	l := Layout{Root: "/node"}
	for _, uid := range []string{
		"", ".", "..", "../../003/victim", "/etc", "a/b", "vm-1",
		"0B6C8F3E-1111-4AAA-8BBB-000000000001",          // upper case: another spelling
		"{0b6c8f3e-1111-4aaa-8bbb-000000000001}",        // braces
		"urn:uuid:0b6c8f3e-1111-4aaa-8bbb-000000000001", // URN
		"0b6c8f3e11114aaa8bbb000000000001",              // no hyphens
		"0b6c8f3e-1111-4aaa-8bbb-00000000000/",
	} {
		for name, f := range map[string]func() (string, error){
			"VMIDir":      func() (string, error) { return l.VMIDir(uid) },
			"VMDir":       func() (string, error) { return l.VMDir(uid) },
			"KeptLogsDir": func() (string, error) { return l.KeptLogsDir(uid) },
			"KeptLogDir":  func() (string, error) { return l.KeptLogDir(vmUID, uid) },
			"KeptLogDir/vm": func() (string, error) {
				return l.KeptLogDir(uid, vmiUID)
			},
			"SnapshotDir":        func() (string, error) { return l.SnapshotDir(uid) },
			"SnapshotVolumePath": func() (string, error) { return l.SnapshotVolumePath(uid, "data") },
		} {
			if p, err := f(); err == nil || p != "" {
				t.Errorf("%s(%q) = %q, %v; want an error and no path", name, uid, p, err)
			}
		}
		if err := l.RemoveVMIDir(uid); err == nil {
			t.Errorf("RemoveVMIDir(%q) accepted", uid)
		}
		if err := l.RemoveVMDir(uid); err == nil {
			t.Errorf("RemoveVMDir(%q) accepted", uid)
		}
		if err := l.RemoveSnapshotDir(uid); err == nil {
			t.Errorf("RemoveSnapshotDir(%q) accepted", uid)
		}
		if err := l.EnsureVMDir(uid, "default", "web"); uid != "" && err == nil {
			t.Errorf("EnsureVMDir(%q) accepted", uid)
		}
	}
	for _, name := range []string{"", ".", "..", "../x", "a/b", "/abs"} {
		if p, err := FileIn("/node/vmis/x/disks", name); err == nil || !errors.Is(err, ErrOutside) {
			t.Errorf("FileIn(%q) = %q, %v; want ErrOutside", name, p, err)
		}
	}
}

// A state record's directory counts only if it is its VMI's directory
// here: one an older agent built from a path, or under another data dir,
// is refused.
func TestCheckVMIDir(t *testing.T) {
	l := Layout{Root: "/node"}
	if err := l.CheckVMIDir(vmiUID, "/node/vmis/"+vmiUID); err != nil {
		t.Fatal(err)
	}
	if err := l.CheckVMIDir(vmiUID, "/node/vmis/"+vmiUID+"/"); err != nil {
		t.Fatalf("trailing slash: %v", err)
	}
	for _, c := range []struct{ uid, dir string }{
		{vmiUID, "/other/vmis/" + vmiUID},
		{vmiUID, "/node/vmis/" + vmUID},
		{vmiUID, "/node/vmis"},
		{"../../003/victim", "/node/vmis/../../003/victim"},
		{"", "/node/vmis"},
	} {
		if err := l.CheckVMIDir(c.uid, c.dir); err == nil {
			t.Errorf("CheckVMIDir(%q, %q) accepted", c.uid, c.dir)
		}
	}
}

// Removal goes through an os.Root: a symlink planted in the layout does
// not take it outside the data dir.
func TestRemoveStaysInsideRoot(t *testing.T) {
	must := mustFor(t)
	root, outside := t.TempDir(), t.TempDir()
	victim := filepath.Join(outside, vmiUID)
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "vmis")); err != nil {
		t.Fatal(err)
	}
	l := Layout{Root: root}
	if err := l.RemoveVMIDir(vmiUID); err == nil {
		t.Error("removal through a symlink out of the data dir reported success")
	}
	if _, err := os.Stat(filepath.Join(victim, "keep")); err != nil {
		t.Fatalf("removal followed a symlink out of the data dir: %v", err)
	}

	// A real directory goes, with what it holds.
	l = Layout{Root: t.TempDir()}
	dir := must(l.VMIDir(vmiUID))
	if err := MkdirTraversable(DisksDir(dir)); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveVMIDir(vmiUID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("VMI directory kept: %v", err)
	}
	if err := l.RemoveVMIDir(vmiUID); err != nil {
		t.Fatalf("removing a missing directory: %v", err)
	}
}

// EnsureVMDir writes a VM's vm.json once; a VMI without a VM (no VM uid)
// gets nothing, never a vm.json in the VMs directory itself.
func TestEnsureVMDir(t *testing.T) {
	must := mustFor(t)
	l := Layout{Root: t.TempDir()}
	if err := l.EnsureVMDir("", "default", "bare"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(l.VMsDir()); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a VMI without a VM created %s: %v", l.VMsDir(), err)
	}
	if _, err := os.Stat(filepath.Join(l.VMsDir(), VMMetaFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a VMI without a VM wrote %s: %v", VMMetaFile, err)
	}

	if err := l.EnsureVMDir(vmUID, "default", "web"); err != nil {
		t.Fatal(err)
	}
	vmDir := must(l.VMDir(vmUID))
	m, err := ReadVMMeta(vmDir)
	if err != nil || m != (VMMeta{Namespace: "default", Name: "web", UID: vmUID}) {
		t.Fatalf("vm.json: %+v, %v", m, err)
	}
	fi, err := os.Stat(vmDir)
	if err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("VM directory mode: %v, %v; want 0711 for QEMU to traverse", fi.Mode(), err)
	}
	// An existing vm.json is kept as it is; the same VM finds its
	// directory again, any other VM named by that uid is refused.
	if err := l.EnsureVMDir(vmUID, "default", "web"); err != nil {
		t.Fatal(err)
	}
	for _, other := range [][2]string{{"default", "other"}, {"team-b", "web"}} {
		if err := l.EnsureVMDir(vmUID, other[0], other[1]); !errors.Is(err, ErrForeign) {
			t.Errorf("EnsureVMDir of %s/%s in default/web's directory: %v, want ErrForeign", other[0], other[1], err)
		}
	}
	if m, err := ReadVMMeta(vmDir); err != nil || m.Name != "web" || m.Namespace != "default" {
		t.Fatalf("vm.json rewritten: %+v, %v", m, err)
	}
}

// A restore's source path comes from the API: only a snapshot volume of
// this root's shape is taken.
func TestCheckSnapshotVolumePath(t *testing.T) {
	root := t.TempDir()
	l := Layout{Root: root}
	good := filepath.Join(root, "snapshots", vmUID, "data.qcow2")
	uid, vol, err := l.CheckSnapshotVolumePath(good)
	if err != nil || uid != vmUID || vol != "data" {
		t.Fatalf("CheckSnapshotVolumePath(%q) = %q, %q, %v", good, uid, vol, err)
	}
	elsewhere := t.TempDir()
	if err := os.MkdirAll(filepath.Join(elsewhere, vmUID), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "snapshots"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A content directory that is a symlink to elsewhere.
	linked := "0b6c8f3e-3333-4aaa-8bbb-000000000003"
	if err := os.Symlink(filepath.Join(elsewhere, vmUID), filepath.Join(root, "snapshots", linked)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"",
		"snapshots/" + vmUID + "/data.qcow2", // relative
		root + "/snapshots/" + vmUID + "/../" + vmUID + "/data.qcow2",          // not clean
		root + "/snapshots/" + vmUID + "/../../state.db",                       // traversal
		filepath.Join(root, "vms", vmUID, "volumes", "data.qcow2"),             // a live volume
		filepath.Join(elsewhere, "snapshots", vmUID, "data.qcow2"),             // another root
		filepath.Join(root, "snapshots", "not-a-uid", "data.qcow2"),            // not a UUID
		filepath.Join(root, "snapshots", strings.ToUpper(vmUID), "data.qcow2"), // another spelling
		filepath.Join(root, "snapshots", vmUID, "data.qcow2.tmp"),              // not a copy
		filepath.Join(root, "snapshots", vmUID, ".qcow2"),                      // no volume
		filepath.Join(root, "snapshots", vmUID, "x", "data.qcow2"),             // deeper
		filepath.Join(root, "snapshots", "data.qcow2"),                         // shallower
		filepath.Join(root, "snapshots", linked, "data.qcow2"),                 // through a symlink
	} {
		if uid, vol, err := l.CheckSnapshotVolumePath(p); err == nil {
			t.Errorf("CheckSnapshotVolumePath(%q) = %q, %q, %v; want refused", p, uid, vol, err)
		}
	}
}

func TestRemoveSnapshotDir(t *testing.T) {
	l := Layout{Root: t.TempDir()}
	p := mustFor(t)(l.SnapshotVolumePath(vmUID, "data"))
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveSnapshotDir(vmUID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Dir(p)); !os.IsNotExist(err) {
		t.Fatalf("snapshot directory left: %v", err)
	}
}
