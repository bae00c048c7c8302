package validation

import (
	"regexp"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Hotplug (docs/hotplug.md): what a hotpluggable disk may be, and the one
// definition of the disk and volume changes a running instance takes
// without a restart (LiveDisks), which the VM controller applies and the
// provider plans by.

// validateHotplug checks the disks whose volumes are hotpluggable: a disk
// target (no CD-ROM) on a bus that can be plugged, and never the disk the
// VM boots from, by order or by default (the first disk, when the VM
// boots from its disks and none has a boot order: domxml's
// defaultBootDisk).
func validateHotplug(spec *apiv1.VirtualMachineInstanceSpec, path *field.Path) field.ErrorList {
	hot := apiv1.HotpluggableVolumes(spec)
	if len(hot) == 0 {
		return nil
	}
	disks := spec.GetDomain().GetDevices().GetDisks()
	dp := path.Child("domain", "devices", "disks")
	var errs field.ErrorList
	for i, d := range disks {
		if hot[d.GetName()] {
			errs = append(errs, validateHotplugDisk(d, dp.Index(i))...)
		}
	}
	if first := firstDiskBoots(spec); first && len(disks) > 0 && hot[disks[0].GetName()] {
		errs = append(errs, field.Forbidden(dp.Index(0), "a hotpluggable disk cannot boot the VM, and the first disk boots when "+
			"the VM boots from its disks and no disk has a boot_order: put another disk first, or give the boot disk boot_order 1"))
	}
	return errs
}

// validateHotplugDisk checks what being hotpluggable asks of disk d at
// path: a disk target (no CD-ROM) on a bus that can be plugged, and no
// boot order. The one definition of these rules, for a VM's disks and an
// AddVolume request's.
func validateHotplugDisk(d *apiv1.Disk, path *field.Path) field.ErrorList {
	if d.GetCdrom() != nil {
		return field.ErrorList{field.Forbidden(path.Child("cdrom"), "the disk of a hotpluggable volume is a disk (virtio or scsi), not a cdrom")}
	}
	var errs field.ErrorList
	bus := d.GetDisk().GetBus()
	if bus == "" {
		bus = apiv1.DefaultDiskBus
	}
	if !slices.Contains(apiv1.HotplugDiskBuses(), bus) {
		e := field.NotSupported(path.Child("disk", "bus"), bus, apiv1.HotplugDiskBuses())
		e.Detail += ": a hotpluggable disk is plugged on the virtio or scsi bus (SATA cannot be plugged)"
		errs = append(errs, e)
	}
	if d.GetBootOrder() != 0 {
		errs = append(errs, field.Forbidden(path.Child("boot_order"), "a hotpluggable disk cannot boot the VM: it may be unplugged"))
	}
	return errs
}

// ValidateAddVolume checks an AddVolume request's disk and volume by
// their field paths in the request (disk.disk.bus, volume.size): the
// rules of a hotpluggable disk and of a persistent volume. Whether the
// name is free and the class exists is for the VM's whole spec, which
// the API checks as for any update.
func ValidateAddVolume(req *apiv1.AddVolumeRequest, opts Options) field.ErrorList {
	var errs field.ErrorList
	dp, vp := field.NewPath("disk"), field.NewPath("volume")
	d, v := req.GetDisk(), req.GetVolume()
	if d == nil {
		errs = append(errs, field.Required(dp, "the disk to add: its name, bus and serial"))
	} else {
		if d.GetName() == "" {
			errs = append(errs, field.Required(dp.Child("name"), ""))
		} else {
			errs = append(errs, dns1123Label(d.GetName(), dp.Child("name"))...)
		}
		errs = append(errs, validateHotplugDisk(d, dp)...)
		errs = append(errs, validateDiskSerial(d.GetSerial(), dp.Child("serial"))...)
	}
	if v == nil {
		return append(errs, field.Required(vp, "the persistent volume to add: its size, and optionally image and storage_class"))
	}
	return append(errs, validatePersistentVolume(v, vp, opts)...)
}

// firstDiskBoots reports whether the first disk boots by default: the VM
// boots from its disks (no kernel_boot) and no disk has a boot order.
func firstDiskBoots(spec *apiv1.VirtualMachineInstanceSpec) bool {
	if spec.GetDomain().GetFirmware().GetKernelBoot() != nil {
		return false
	}
	for _, d := range spec.GetDomain().GetDevices().GetDisks() {
		if d.GetBootOrder() > 0 {
			return false
		}
	}
	return true
}

// LiveDiskChange is have's disks and volumes with what a running
// instance takes of want without a restart (LiveDisks).
type LiveDiskChange struct {
	Disks   []*apiv1.Disk
	Volumes []*apiv1.Volume
	// Added and Removed name the hotpluggable disks plugged and
	// unplugged; Grown says which volumes grow ("data: 1Gi → 2Gi").
	Added, Removed, Grown []string
}

// Changed reports whether the change does anything.
func (c LiveDiskChange) Changed() bool {
	return len(c.Added)+len(c.Removed)+len(c.Grown) > 0
}

// LiveDisks returns have's (a running instance's) disks and volumes with
// what it takes of want (its VM's template) without a restart, and
// whether that leaves them as want has them:
//   - a hotpluggable disk only in want is plugged: it and its volume are
//     added, after have's own;
//   - a hotpluggable disk only in have is unplugged: removed with its
//     volume;
//   - a persistent volume in both whose size grows takes the new size
//     (the node grows it online; ValidatePersistentVolumeUpdate refuses a
//     shrink of a template, and a shrink here, from a template a snapshot
//     restored, is left for a restart).
//
// Anything else (a disk or volume of another kind added or removed, a
// disk's bus, serial or boot order, a volume's source, class or
// hotpluggable flag changed, disks reordered) is left as have has it,
// and complete is false: that waits for a restart. A hotpluggable disk's
// place in the list does not count: a plugged disk comes after the
// others, whatever its place in the template, and the guest names it by
// its serial, not by its order. have is not changed.
func LiveDisks(want, have *apiv1.VirtualMachineInstanceSpec) (c LiveDiskChange, complete bool) {
	wantHot, haveHot := apiv1.HotpluggableVolumes(want), apiv1.HotpluggableVolumes(have)
	wantDisks := byName(want.GetDomain().GetDevices().GetDisks())
	haveDisks := byName(have.GetDomain().GetDevices().GetDisks())
	wantVols, haveVols := byName(want.GetVolumes()), byName(have.GetVolumes())

	removed := map[string]bool{}
	for _, d := range have.GetDomain().GetDevices().GetDisks() {
		if _, kept := wantDisks[d.GetName()]; !kept && haveHot[d.GetName()] {
			removed[d.GetName()] = true
			c.Removed = append(c.Removed, d.GetName())
			continue
		}
		c.Disks = append(c.Disks, d)
	}
	for _, v := range have.GetVolumes() {
		if removed[v.GetName()] {
			continue
		}
		c.Volumes = append(c.Volumes, grownVolume(v, wantVols[v.GetName()], &c.Grown))
	}
	for _, d := range want.GetDomain().GetDevices().GetDisks() {
		n := d.GetName()
		_, has := haveDisks[n]
		v, hasVol := wantVols[n]
		if _, volHad := haveVols[n]; has || volHad || !hasVol || !wantHot[n] {
			continue
		}
		c.Disks = append(c.Disks, d)
		c.Volumes = append(c.Volumes, v)
		c.Added = append(c.Added, n)
	}
	complete = sameDisks(want, c)
	return c, complete
}

// grownVolume is have with want's size when want is the same persistent
// volume grown; have otherwise. A grown one is noted in grown.
func grownVolume(have, want *apiv1.Volume, grown *[]string) *apiv1.Volume {
	hp, wp := have.GetPersistent(), want.GetPersistent()
	if hp == nil || wp == nil || hp.GetSize() == wp.GetSize() {
		return have
	}
	if cmp, ok := compareQuantities(wp.GetSize(), hp.GetSize()); !ok || cmp < 0 {
		return have
	}
	out := proto.Clone(have).(*apiv1.Volume)
	out.Persistent.Size = wp.GetSize()
	*grown = append(*grown, have.GetName()+": "+hp.GetSize()+" → "+wp.GetSize())
	return out
}

// sameDisks reports whether c's disks and volumes are want's, hotpluggable
// ones in any order.
func sameDisks(want *apiv1.VirtualMachineInstanceSpec, c LiveDiskChange) bool {
	hot := apiv1.HotpluggableVolumes(want)
	return equalUpToHotplug(want.GetDomain().GetDevices().GetDisks(), c.Disks, hot) &&
		equalUpToHotplug(want.GetVolumes(), c.Volumes, hot)
}

// equalUpToHotplug compares two lists of disks or volumes: the same
// elements, those named in hot in any order, the others in order.
func equalUpToHotplug[T interface {
	proto.Message
	GetName() string
}](a, b []T, hot map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	canon := func(l []T) []T {
		out := slices.Clone(l)
		slices.SortStableFunc(out, func(x, y T) int {
			hx, hy := hot[x.GetName()], hot[y.GetName()]
			switch {
			case hx && hy:
				return strings.Compare(x.GetName(), y.GetName())
			case hx:
				return 1
			case hy:
				return -1
			}
			return 0
		})
		return out
	}
	return slices.EqualFunc(canon(a), canon(b), func(x, y T) bool { return proto.Equal(x, y) })
}

func byName[T interface{ GetName() string }](l []T) map[string]T {
	out := make(map[string]T, len(l))
	for _, x := range l {
		out[x.GetName()] = x
	}
	return out
}

// Bounds of a status's volume list: an instance has at most MaxDevices
// disks, and as many may be on their way out.
const maxVolumeStatuses = 2 * MaxDevices

var (
	volumePhases = []string{apiv1.VolumePending, apiv1.VolumeAttachedToNode, apiv1.VolumeReady, apiv1.VolumeDetaching}
	// diskTarget is a libvirt target name the launcher gives a disk.
	diskTarget = regexp.MustCompile(`^(vd|sd)[a-z]{1,3}$`)
)

// validateVolumeStatuses checks an instance status's volume_status, as a
// node sends it: bounded, unique volume names, known phases, target
// names in the launcher's form, bounded reasons and messages.
func validateVolumeStatuses(st []*apiv1.VolumeStatus, path *field.Path) field.ErrorList {
	if n := len(st); n > maxVolumeStatuses {
		return field.ErrorList{field.TooMany(path, n, maxVolumeStatuses)}
	}
	var errs field.ErrorList
	seen := nameIndex{}
	for i, s := range st {
		p := path.Index(i)
		errs = append(errs, uniqueName(s.GetName(), p.Child("name"), i, seen, true)...)
		errs = append(errs, oneOf(s.GetPhase(), p.Child("phase"), volumePhases)...)
		if t := s.GetTarget(); t != "" && !diskTarget.MatchString(t) {
			errs = append(errs, field.Invalid(p.Child("target"), t, "must be a disk target such as vdb or sdc"))
		}
		errs = append(errs, validatePrintable(s.GetReason(), maxStatusReasonLen, p.Child("reason"), true)...)
		errs = append(errs, validateStatusMessage(s.GetMessage(), p.Child("message"))...)
	}
	return errs
}
