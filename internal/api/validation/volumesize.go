package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What a change of a template may do to the persistent volumes it names,
// once they may exist: grow them, never shrink them or swap their image.
// A persistent volume is known by its name (its file on the node, its
// image in a pool): the same name in the old and the new template is the
// same disk. The API (ValidateVirtualMachineUpdate, ValidatePoolUpdate)
// and the provider (plan time) ask ValidatePersistentVolumeUpdate; the VM
// controller and the provider both ask LiveDisks (hotplug.go) whether a
// change applies to a running guest.

// VolumeSectorSize is the unit disks are sized in: qemu-img create rounds
// a size up to it, and qemu-img resize and libvirt's block resize of a
// qcow2 take only whole sectors.
const VolumeSectorSize = 512

// VolumeBytes is the size, in bytes, a persistent volume of size (a valid
// quantity, as validation accepts) is made and grown to: rounded up to a
// whole number of sectors, as qemu-img makes it. Comparing a disk's
// capacity with this, not with the quantity, is what keeps an unaligned
// size ("100M") from being grown again on every start.
func VolumeBytes(size string) (int64, error) {
	if errs := validateDiskSize(size, nil); len(errs) > 0 {
		return 0, fmt.Errorf("size %q: %s", size, errs[0].Detail)
	}
	q, err := parseQuantity(size)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", size, err)
	}
	// At most 1Ei (validateDiskSize): rounding up stays far inside int64.
	b := q.Value()
	return (b + VolumeSectorSize - 1) / VolumeSectorSize * VolumeSectorSize, nil
}

// ValidatePersistentVolumeUpdate checks what an update of an instance
// template (oldSpec → newSpec, at path) does to the persistent volumes
// both name: a smaller size is refused (the guest's data beyond the new
// end would be cut off, and no guest file system shrinks with its disk),
// and so is another image (the image is copied in only when the volume
// is made, so the change would be ignored without a word). A volume is
// renamed to get a new one. Volumes only in newSpec are new, and free.
// Both specs are taken as validated: a size that does not parse is
// validation's to report, not this rule's.
func ValidatePersistentVolumeUpdate(newSpec, oldSpec *apiv1.VirtualMachineInstanceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	eachKeptVolume(newSpec, oldSpec, func(i int, _ string, pv, was *apiv1.PersistentVolume) {
		p := path.Child("volumes").Index(i).Child("persistent")
		if cmp, ok := compareQuantities(pv.GetSize(), was.GetSize()); ok && cmp < 0 {
			errs = append(errs, field.Invalid(p.Child("size"), pv.GetSize(), fmt.Sprintf(
				"may not shrink from %s to %s: a persistent volume only grows (rename the disk to get a new, smaller volume)",
				was.GetSize(), pv.GetSize())))
		}
		if pv.GetImage() != was.GetImage() {
			errs = append(errs, field.Invalid(p.Child("image"), pv.GetImage(), fmt.Sprintf(
				"may not change from %s to %s: the image is copied in only when the volume is made "+
					"(rename the disk to get a new volume from another image)", imageOrBlank(was.GetImage()), imageOrBlank(pv.GetImage()))))
		}
	})
	return errs
}

func imageOrBlank(image string) string {
	if image == "" {
		return "none (a blank disk)"
	}
	return fmt.Sprintf("%q", image)
}

// compareQuantities compares two quantities by value; ok is false when
// either does not parse.
func compareQuantities(a, b string) (cmp int, ok bool) {
	qa, errA := parseQuantity(a)
	qb, errB := parseQuantity(b)
	if errA != nil || errB != nil {
		return 0, false
	}
	return qa.Cmp(qb), true
}
