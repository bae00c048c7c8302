package nodedir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// The layout is on disk across agent versions: a new agent must find what
// an old one wrote, so the names are pinned here, spelled out.
func TestLayoutPaths(t *testing.T) {
	l := Layout{Root: "/node"}
	for _, p := range []struct{ got, want string }{
		{l.StateDBPath(), "/node/state.db"},
		{l.VMIDir("i1"), "/node/vmis/i1"},
		{ConsoleLogPath(l.VMIDir("i1")), "/node/vmis/i1/console.log"},
		{DisksDir(l.VMIDir("i1")), "/node/vmis/i1/disks"},
		{VolumesDir(l.VMIDir("i1")), "/node/vmis/i1/volumes"},
		{l.VMsDir(), "/node/vms"},
		{l.VMDir("v1"), "/node/vms/v1"},
		{VolumesDir(l.VMDir("v1")), "/node/vms/v1/volumes"},
		{l.KeptLogsDir("v1"), "/node/vms/v1/console"},
		{ConsoleLogPath(l.KeptLogDir("v1", "i1")), "/node/vms/v1/console/i1/console.log"},
	} {
		if p.got != p.want {
			t.Errorf("got %s, want %s", p.got, p.want)
		}
	}
}

// EnsureVMDir writes a VM's vm.json once; a VMI without a VM (no VM uid)
// gets nothing, never a vm.json in the VMs directory itself.
func TestEnsureVMDir(t *testing.T) {
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

	if err := l.EnsureVMDir("v1", "default", "web"); err != nil {
		t.Fatal(err)
	}
	m, err := ReadVMMeta(l.VMDir("v1"))
	if err != nil || m != (VMMeta{Namespace: "default", Name: "web", UID: "v1"}) {
		t.Fatalf("vm.json: %+v, %v", m, err)
	}
	fi, err := os.Stat(l.VMDir("v1"))
	if err != nil || fi.Mode().Perm() != 0o711 {
		t.Fatalf("VM directory mode: %v, %v; want 0711 for QEMU to traverse", fi.Mode(), err)
	}
	// An existing vm.json is kept as it is.
	if err := l.EnsureVMDir("v1", "default", "other"); err != nil {
		t.Fatal(err)
	}
	if m, err := ReadVMMeta(l.VMDir("v1")); err != nil || m.Name != "web" {
		t.Fatalf("vm.json rewritten: %+v, %v", m, err)
	}
}
