// Package nodedir owns the layout of the node agent's data directory:
// where a VMI's files (disk overlays, cloud-init seed, console log) and a
// VM's files (persistent volumes, kept console logs) live, the vm.json
// that names a VM's directory, and the directory modes QEMU needs. The
// disk and console rooms of the node agent both build on it.
//
//	<root>/state.db                  the agent's local database (package state)
//	<root>/vmis/<vmi uid>/           one instance; removed when it ends
//	    console.log[.N]              serial console, written by virtlogd
//	    disks/                       overlays and seeds
//	    volumes/                     persistent volumes of a VMI without a VM
//	<root>/vms/<vm uid>/             a VM across its instances
//	    vm.json                      which VM this is
//	    volumes/                     persistent volumes
//	    console/<vmi uid>/           console logs of ended instances
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
type Layout struct {
	// Root is the node data directory (absolute).
	Root string
}

// StateDBPath is the node agent's local database.
func (l Layout) StateDBPath() string { return filepath.Join(l.Root, "state.db") }

// VMIDir is where a VMI's files live. It is named by uid so a new VMI of
// the same name never sees an old one's disks.
func (l Layout) VMIDir(uid string) string { return filepath.Join(l.Root, "vmis", uid) }

// VMsDir holds the directories of VMs.
func (l Layout) VMsDir() string { return filepath.Join(l.Root, "vms") }

// VMDir holds what a VM keeps on this node across its instances:
// persistent volumes and the console logs of ended instances. It is
// removed when the VM is deleted.
func (l Layout) VMDir(vmUID string) string { return filepath.Join(l.VMsDir(), vmUID) }

// KeptLogsDir holds the console logs of VM vmUID's ended instances, one
// directory per VMI uid (KeptLogDir).
func (l Layout) KeptLogsDir(vmUID string) string { return filepath.Join(l.VMDir(vmUID), "console") }

// KeptLogDir holds the kept console log of VMI vmiUID of VM vmUID, under
// the name ConsoleLogPath gives it.
func (l Layout) KeptLogDir(vmUID, vmiUID string) string {
	return filepath.Join(l.KeptLogsDir(vmUID), vmiUID)
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

// EnsureVMDir creates the directory of VM vmUID (namespace/name) with
// its vm.json, unless it has one. A VMI without a VM (vmUID "") has no
// VM directory: nothing is created, so that no vm.json ever lands in
// VMsDir itself.
func (l Layout) EnsureVMDir(vmUID, namespace, name string) error {
	if vmUID == "" {
		return nil
	}
	dir := l.VMDir(vmUID)
	meta := filepath.Join(dir, VMMetaFile)
	if _, err := os.Stat(meta); err == nil {
		return nil
	}
	if err := MkdirTraversable(dir); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	b, err := json.Marshal(VMMeta{Namespace: namespace, Name: name, UID: vmUID})
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(meta, b, 0o600)
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
// still cannot list them.
func MkdirTraversable(dir string) error {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := os.Mkdir(missing[i], 0o711); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		// The umask may have taken the execute bits.
		if err := os.Chmod(missing[i], 0o711); err != nil {
			return err
		}
	}
	return nil
}
