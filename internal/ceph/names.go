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
	snapPrefix  = "snap-"
	// The suffixes of a volume's images besides the live one, each
	// followed by the uid of the restore that made it. A volume name is a
	// DNS label: it never holds the '.'.
	stagedInfix  = ".restore-"
	retiredInfix = ".retired-"
)

// VolumeImage is the image of persistent volume vol of the VM (or bare
// instance) with uid owner.
func VolumeImage(owner, vol string) string { return "vm-" + owner + volumeInfix + vol }

// StagedImage is where restore restoreUID clones a snapshot of volume vol
// of VM owner before its commit point: beside the live image, which it
// replaces at the swap.
func StagedImage(owner, vol, restoreUID string) string {
	return VolumeImage(owner, vol) + stagedInfix + restoreUID
}

// RetiredImage is the name the live image of volume vol of VM owner gets
// when restore restoreUID replaces it: it is kept while snapshots of it
// are (other snapshot contents refer to them by the VM's uid and the
// volume's name alone), and removed once it has none.
func RetiredImage(owner, vol, restoreUID string) string {
	return VolumeImage(owner, vol) + retiredInfix + restoreUID
}

// NVRAMImage is the EFI variable store of the VM with uid owner.
func NVRAMImage(owner string) string { return "vm-" + owner + "-nvram" }

// BaseImage is the image an Image's content (by sha256) is imported to,
// once per pool.
func BaseImage(sha256 string) string { return "img-" + sha256 }

// SnapshotName is the RBD snapshot a VirtualMachineSnapshotContent (by
// uid) takes of each volume.
func SnapshotName(contentUID string) string { return snapPrefix + contentUID }

// SnapshotContentUID is the content uid of an RBD snapshot named by
// SnapshotName, or "" for another snapshot.
func SnapshotContentUID(snap string) string {
	uid, ok := strings.CutPrefix(snap, snapPrefix)
	if !ok || len(uid) != 36 {
		return ""
	}
	return uid
}

// OwnerOf is the VM uid a volume or NVRAM image belongs to, or "" for an
// image that is none of virtplane's VM images.
func OwnerOf(image string) string {
	return ParseImage(image).Owner
}

// Image kinds (ImageName.Kind).
const (
	KindVolume  = "volume"  // the live image of a volume
	KindStaged  = "staged"  // StagedImage
	KindRetired = "retired" // RetiredImage
	KindNVRAM   = "nvram"
)

// ImageName is what a VM image's name says.
type ImageName struct {
	Kind   string // "" for an image that is none of virtplane's VM images
	Owner  string // the VM's (or bare instance's) uid
	Volume string // for the volume kinds
	// Restore is the uid of the restore that made a staged or retired
	// image.
	Restore string
}

// ParseImage reads an image name made by VolumeImage, StagedImage,
// RetiredImage or NVRAMImage; others have an empty Kind.
func ParseImage(image string) ImageName {
	rest, ok := strings.CutPrefix(image, "vm-")
	if !ok || len(rest) < 36 {
		return ImageName{}
	}
	owner, tail := rest[:36], rest[36:]
	if tail == "-nvram" {
		return ImageName{Kind: KindNVRAM, Owner: owner}
	}
	vol, ok := strings.CutPrefix(tail, volumeInfix)
	if !ok || vol == "" {
		return ImageName{}
	}
	n := ImageName{Kind: KindVolume, Owner: owner, Volume: vol}
	for infix, kind := range map[string]string{stagedInfix: KindStaged, retiredInfix: KindRetired} {
		if v, r, ok := strings.Cut(vol, infix); ok {
			if v == "" || len(r) != 36 {
				return ImageName{}
			}
			n.Kind, n.Volume, n.Restore = kind, v, r
		}
	}
	if strings.Contains(n.Volume, ".") {
		return ImageName{}
	}
	return n
}
