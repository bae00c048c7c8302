package ceph

import "strings"

// The names virtplane gives its RBD images and snapshots, the one
// definition every part uses. A VM's are found from its uid alone, so no
// object needs to record them; the prefixes keep virtplane's images apart
// from others in a shared pool.
const (
	// BaseSnap is the protected snapshot of an imported image that
	// volumes are cloned from.
	BaseSnap    = "base"
	volumeInfix = "-vol-"
)

// VolumeImage is the image of persistent volume vol of the VM (or bare
// instance) with uid owner.
func VolumeImage(owner, vol string) string { return "vm-" + owner + volumeInfix + vol }

// NVRAMImage is the EFI variable store of the VM with uid owner.
func NVRAMImage(owner string) string { return "vm-" + owner + "-nvram" }

// BaseImage is the image an Image's content (by sha256) is imported to,
// once per pool.
func BaseImage(sha256 string) string { return "img-" + sha256 }

// SnapshotName is the RBD snapshot a VirtualMachineSnapshotContent (by
// uid) takes of each volume.
func SnapshotName(contentUID string) string { return "snap-" + contentUID }

// OwnerOf is the VM uid a volume or NVRAM image belongs to, or "" for an
// image that is none of virtplane's VM images.
func OwnerOf(image string) string {
	rest, ok := strings.CutPrefix(image, "vm-")
	if !ok || len(rest) < 36 {
		return ""
	}
	owner, tail := rest[:36], rest[36:]
	if tail != "-nvram" && !strings.HasPrefix(tail, volumeInfix) {
		return ""
	}
	return owner
}
