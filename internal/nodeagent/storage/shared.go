package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// sharedRoot is the directory virtplane keeps under a shared filesystem's
// mount path: everything it makes there is below it.
const sharedRoot = "virtplane"

// checkShared checks that a shared filesystem's path is a directory the
// node can write in: it makes path/virtplane (traversable by QEMU's user)
// and a file there.
func checkShared(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("spec.shared_filesystem.path %s does not exist on this node: mount the filesystem there", path)
	case err != nil:
		return fmt.Errorf("spec.shared_filesystem.path: %w", err)
	case !fi.IsDir():
		return fmt.Errorf("spec.shared_filesystem.path %s is not a directory", path)
	}
	root := filepath.Join(path, sharedRoot)
	if err := os.Mkdir(root, 0o711); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("spec.shared_filesystem.path: %w", err)
	}
	f, err := os.CreateTemp(root, ".probe-")
	if err != nil {
		return fmt.Errorf("spec.shared_filesystem.path %s is not writable here: %w", path, err)
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// SharedLayout is a shared filesystem class's directory laid out as a
// node data directory is (package nodedir): the VMs' directories
// (path/virtplane/vms/<uid>, with vm.json, volumes and NVRAM) made,
// checked and removed by the same rules as a node's own, and the copies of
// snapshot content uid's volumes on the class in its SnapshotDir(uid),
// where every node the class selects sees them (docs/snapshots.md).
func (c *Class) SharedLayout() nodedir.Layout {
	return nodedir.Layout{Root: filepath.Join(c.SharedPath(), sharedRoot)}
}
