// Package nodedir owns the layout of the node agent's data directory:
// where a VMI's files (disk overlays, cloud-init seed, console log) and a
// VM's files (persistent volumes, kept console logs) live, the vm.json
// that names a VM's directory, and the directory modes QEMU needs. The
// disk and console rooms of the node agent both build on it.
//
//	<root>/state.db                  the agent's local database (package state)
//	<root>/ceph/virtplane-<class>.conf an rbd class's ceph.conf for QEMU (no secret)
//	<root>/vmis/<vmi uid>/           one instance; removed when it ends
//	    console.log[.N]              serial console, written by virtlogd
//	    disks/                       overlays and seeds
//	    volumes/                     persistent volumes of a VMI without a VM
//	<root>/vms/<vm uid>/             a VM across its instances
//	    vm.json                      which VM this is
//	    volumes/                     persistent volumes
//	    nvram.fd                     EFI variables of an EFI-booted VM
//	    console/<vmi uid>/           console logs of ended instances
//	<root>/snapshots/<content uid>/  one snapshot's data (a snapshot content)
//	    <volume>.qcow2               standalone copy of a persistent volume
//	    <volume>.qcow2.tmp           a copy being written
//
// Nothing else spells these names: the agent, its rooms and the tests
// that look at a node's files all build paths here.
package nodedir

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
)

// VMMetaFile names the VM a <root>/vms/<uid> directory belongs to, so the
// directory can be removed once that VM is gone.
const VMMetaFile = "vm.json"

// VMMeta is the content of VMMetaFile.
type VMMeta struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// Layout is a node data directory.
//
// Directories named by a uid are only ever built from a UUID in canonical
// form (validation.CheckUID): the uid comes from the API, and a uid such
// as "../../x" or "" must be an error, never a path. Paths that take a uid
// return one; files named after API data (a disk's name) go through
// FileIn.
type Layout struct {
	// Root is the node data directory (absolute).
	Root string
}

// StateDBPath is the node agent's local database.
func (l Layout) StateDBPath() string { return filepath.Join(l.Root, "state.db") }

// CephConfDir holds the ceph.conf QEMU reads for each rbd class
// (package storage), readable by QEMU's user; no secret.
func (l Layout) CephConfDir() string { return filepath.Join(l.Root, "ceph") }

// StorageDir holds a directory per storage class the node uses, with its
// key (package storage): root's alone.
func (l Layout) StorageDir() string { return filepath.Join(l.Root, "storage") }

// VMIsDir holds the directories of VMIs.
func (l Layout) VMIsDir() string { return filepath.Join(l.Root, vmisDir) }

// VMIDir is where a VMI's files live. It is named by uid so a new VMI of
// the same name never sees an old one's disks.
func (l Layout) VMIDir(uid string) (string, error) { return l.uidDir(vmisDir, uid) }

// VMsDir holds the directories of VMs.
func (l Layout) VMsDir() string { return filepath.Join(l.Root, vmsDir) }

// VMDir holds what a VM keeps on this node across its instances:
// persistent volumes and the console logs of ended instances. It is
// removed when the VM is deleted.
func (l Layout) VMDir(vmUID string) (string, error) { return l.uidDir(vmsDir, vmUID) }

// KeptLogsDir holds the console logs of VM vmUID's ended instances, one
// directory per VMI uid (KeptLogDir).
func (l Layout) KeptLogsDir(vmUID string) (string, error) {
	dir, err := l.VMDir(vmUID)
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "console"), nil
}

// KeptLogDir holds the kept console log of VMI vmiUID of VM vmUID, under
// the name ConsoleLogPath gives it.
func (l Layout) KeptLogDir(vmUID, vmiUID string) (string, error) {
	base, err := l.KeptLogsDir(vmUID)
	if err != nil {
		return "", err
	}
	if err := checkUID("VMI", vmiUID); err != nil {
		return "", err
	}
	return filepath.Join(base, vmiUID), nil
}

// CheckVMIDir reports an error unless dir is the directory of VMI uid in
// this layout. A state record carries its VMI's directory; one written by
// an older agent from a uid that was a path, or under another data dir,
// must not be taken for a place to write or remove files.
func (l Layout) CheckVMIDir(uid, dir string) error {
	want, err := l.VMIDir(uid)
	if err != nil {
		return err
	}
	if filepath.Clean(dir) != want {
		return fmt.Errorf("%w: %q is not the directory of VMI %s (%s)", ErrOutside, dir, uid, want)
	}
	return nil
}

// RemoveVMIDir removes the directory of VMI uid with all it holds.
func (l Layout) RemoveVMIDir(uid string) error {
	if err := checkUID("VMI", uid); err != nil {
		return err
	}
	return l.removeAll(filepath.Join(vmisDir, uid))
}

// RemoveVMDir removes the directory of VM vmUID with all it holds.
func (l Layout) RemoveVMDir(vmUID string) error {
	if err := checkUID("VM", vmUID); err != nil {
		return err
	}
	return l.removeAll(filepath.Join(vmsDir, vmUID))
}

// removeAll removes rel under Root through an os.Root, so that not even a
// symlink planted on the way (vmis -> /) takes the removal outside.
func (l Layout) removeAll(rel string) error {
	r, err := os.OpenRoot(l.Root)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.RemoveAll(rel)
}

// ErrOutside: a path built from API data would not stay inside the
// directory it belongs in.
var ErrOutside = errors.New("path outside its directory")

// FileIn returns the file name in dir, where name comes from API data (a
// disk's name and a suffix): it must be one local path element, so the
// file is in dir and nowhere else.
func FileIn(dir, name string) (string, error) {
	if !isElement(name) {
		return "", fmt.Errorf("%w: %q is not a file name", ErrOutside, name)
	}
	return filepath.Join(dir, name), nil
}

const (
	vmisDir      = "vmis"
	vmsDir       = "vms"
	snapshotsDir = "snapshots"
)

func (l Layout) uidDir(parent, uid string) (string, error) {
	kind := "VMI"
	switch parent {
	case vmsDir:
		kind = "VM"
	case snapshotsDir:
		kind = "snapshot"
	}
	if err := checkUID(kind, uid); err != nil {
		return "", err
	}
	return filepath.Join(l.Root, parent, uid), nil
}

// checkUID admits only UUIDs as directory names. isElement is implied by
// a UUID; it is checked too so that no future change of the uid rule can
// make this a path.
func checkUID(kind, uid string) error {
	if err := validation.CheckUID(uid); err != nil {
		return fmt.Errorf("%s directory: %w", kind, err)
	}
	if !isElement(uid) {
		return fmt.Errorf("%s directory: %w: %q", kind, ErrOutside, uid)
	}
	return nil
}

// isElement: s names an entry of a directory, not the directory itself,
// its parent or anything further.
func isElement(s string) bool {
	return filepath.IsLocal(s) && s != "." && !strings.ContainsRune(s, filepath.Separator)
}

// ConsoleLogPath is the serial console log in dir, a VMI's directory or
// a kept log's (KeptLogDir): virtlogd appends the guest's serial output
// to it in the VMI's directory, and it goes with that directory when the
// VMI ends unless it is kept.
func ConsoleLogPath(dir string) string { return filepath.Join(dir, "console.log") }

// DisksDir holds the disk overlays and cloud-init seeds of the VMI whose
// directory is vmiDir.
func DisksDir(vmiDir string) string { return filepath.Join(vmiDir, "disks") }

// VolumesDir holds the persistent volumes kept in dir: a VM's directory
// (VMDir), where they outlive instances, or the directory of a VMI
// without a VM, whose lifetime they share.
func VolumesDir(dir string) string { return filepath.Join(dir, "volumes") }

// NVRAMPath is the EFI variable store kept in dir: a VM's directory
// (VMDir), so the guest's boot entries outlive its instances and go with
// the VM, or the directory of a VMI without a VM. libvirt fills it from
// the firmware's VARS template on the first start.
func NVRAMPath(dir string) string { return filepath.Join(dir, "nvram.fd") }

// EnsureVMDir creates the directory of VM vmUID (namespace/name) with
// its vm.json, unless it has one, which must be namespace/name's
// (CheckVMDirOwner). A VMI without a VM (vmUID "") has no VM directory:
// nothing is created, so that no vm.json ever lands in VMsDir itself.
func (l Layout) EnsureVMDir(vmUID, namespace, name string) error {
	if vmUID == "" {
		return nil
	}
	dir, err := l.VMDir(vmUID)
	if err != nil {
		return err
	}
	if exists, err := checkVMDirOwner(dir, namespace, name); exists || err != nil {
		return err
	}
	meta := filepath.Join(dir, VMMetaFile)
	if err := MkdirTraversable(dir); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	b, err := json.Marshal(VMMeta{Namespace: namespace, Name: name, UID: vmUID})
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(meta, b, 0o600)
}

// ErrForeign: a directory built from a uid belongs to another object
// than the one that named it (another namespace's VM, another namespace's
// snapshot).
var ErrForeign = errors.New("belongs to another object")

// CheckVMDirOwner checks that the VM directory dir, when its vm.json
// exists, is the directory of VM namespace/name: uids come from API
// objects that other parties write (a VMI's owner, a snapshot content's
// source, a restore's target), and a uid of another namespace's VM must
// never reach that VM's volumes. A directory without vm.json has no
// volumes yet (EnsureVMDir writes it first) and passes.
func CheckVMDirOwner(dir, namespace, name string) error {
	_, err := checkVMDirOwner(dir, namespace, name)
	return err
}

// checkVMDirOwner is CheckVMDirOwner, and whether dir has a vm.json: one
// read of it, which EnsureVMDir does on every start of a VM that keeps
// files there.
func checkVMDirOwner(dir, namespace, name string) (exists bool, _ error) {
	m, err := ReadVMMeta(dir)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return true, err
	}
	if m.Namespace != namespace || m.Name != name {
		return true, fmt.Errorf("VM directory %s is VM %s/%s's, not %s/%s: %w", filepath.Base(dir), m.Namespace, m.Name, namespace, name, ErrForeign)
	}
	return true, nil
}

// ReadVMMeta reads the vm.json of the VM directory dir.
func ReadVMMeta(dir string) (VMMeta, error) {
	var m VMMeta
	b, err := os.ReadFile(filepath.Join(dir, VMMetaFile))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decoding %s: %w", VMMetaFile, err)
	}
	return m, nil
}

// MkdirTraversable creates dir and its missing parents with mode 0711:
// QEMU runs as its own user and must traverse them to the disks libvirt
// hands it (libvirt relabels the files, not their directories); others
// still cannot list them. Each directory it creates is durable (its
// parent synced), as the volumes later committed in it must be.
func MkdirTraversable(dir string) error {
	created, err := fsutil.MkdirAll(dir, 0o711)
	if err != nil {
		return err
	}
	for _, d := range created {
		// The umask may have taken the execute bits.
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotsDir holds the data of snapshots, one directory per snapshot
// content.
func (l Layout) SnapshotsDir() string { return filepath.Join(l.Root, snapshotsDir) }

// SnapshotDir holds the volume copies of snapshot content uid. It
// outlives the VM: a snapshot can be restored into another VM.
func (l Layout) SnapshotDir(contentUID string) (string, error) {
	return l.uidDir(snapshotsDir, contentUID)
}

// SnapshotVolumePath is the copy of volume in snapshot content uid.
func (l Layout) SnapshotVolumePath(contentUID, volume string) (string, error) {
	dir, err := l.SnapshotDir(contentUID)
	if err != nil {
		return "", err
	}
	return FileIn(dir, volume+".qcow2")
}

// CheckSnapshotVolumePath returns the content uid and volume of path,
// which comes from the API (a restore's source_path): it must be exactly
// SnapshotVolumePath's shape under this root, with no symlink on the way
// (Lstat of each directory), so that a restore copies a snapshot's data
// and nothing else of the host.
func (l Layout) CheckSnapshotVolumePath(path string) (contentUID, volume string, err error) {
	bad := func(why string) (string, string, error) {
		return "", "", fmt.Errorf("%w: %q is not a snapshot volume of %s: %s", ErrOutside, path, l.SnapshotsDir(), why)
	}
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return bad("not a clean absolute path")
	}
	rel, err := filepath.Rel(l.SnapshotsDir(), path)
	if err != nil || !filepath.IsLocal(rel) {
		return bad("outside the snapshots directory")
	}
	uid, file, ok := strings.Cut(rel, string(filepath.Separator))
	if !ok || strings.ContainsRune(file, filepath.Separator) {
		return bad("not <content uid>/<volume>.qcow2")
	}
	vol, ok := strings.CutSuffix(file, ".qcow2")
	if !ok || vol == "" {
		return bad("not a .qcow2 file")
	}
	want, err := l.SnapshotVolumePath(uid, vol)
	if err != nil {
		return "", "", err
	}
	if want != path {
		return bad("not the path of its volume")
	}
	for _, dir := range []string{l.SnapshotsDir(), filepath.Dir(path)} {
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			return bad(dir + " is a symlink")
		}
	}
	if fi, err := os.Lstat(path); err == nil && !fi.Mode().IsRegular() {
		return bad("not a regular file")
	}
	return uid, vol, nil
}

// RemoveSnapshotDir removes the data of snapshot content uid.
func (l Layout) RemoveSnapshotDir(contentUID string) error {
	if err := checkUID("snapshot", contentUID); err != nil {
		return err
	}
	return l.removeAll(filepath.Join(snapshotsDir, contentUID))
}
