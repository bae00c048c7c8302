package validation

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Boot rules (docs/guests.md):
//   - kernel_boot boots its kernel directly (QEMU -kernel, SeaBIOS);
//   - otherwise the guest boots from its disks through the bootloader's
//     firmware: bios (SeaBIOS, also when bootloader is unset) or efi
//     (OVMF, picked by libvirt from the host's firmware descriptors);
//   - the disks boot in boot_order; when no disk has one, the first disk
//     in the list boots (domxml applies it, so stored specs stay as
//     written);
//   - a VM with neither kernel_boot nor disks is valid, as in KubeVirt:
//     its firmware finds nothing to boot.
func validateFirmware(fw *apiv1.Firmware, path *field.Path, opts Options) field.ErrorList {
	var errs field.ErrorList
	if kb := fw.GetKernelBoot(); kb != nil {
		errs = append(errs, validateKernelBoot(kb, path.Child("kernel_boot"), opts)...)
	}
	if bl := fw.GetBootloader(); bl != nil {
		errs = append(errs, validateBootloader(bl, fw.GetKernelBoot() != nil, path.Child("bootloader"))...)
	}
	return errs
}

func validateKernelBoot(kb *apiv1.KernelBoot, p *field.Path, opts Options) field.ErrorList {
	var errs field.ErrorList
	if kb.GetKernel() == "" {
		errs = append(errs, field.Required(p.Child("kernel"), "required for kernel boot"))
	} else {
		errs = append(errs, ValidateImagePath(kb.GetKernel(), p.Child("kernel"), opts.ImageDir)...)
	}
	if kb.GetInitrd() != "" {
		errs = append(errs, ValidateImagePath(kb.GetInitrd(), p.Child("initrd"), opts.ImageDir)...)
	}
	switch cmd := kb.GetCmdline(); {
	case len(cmd) > maxKernelCmdline:
		errs = append(errs, field.TooLong(p.Child("cmdline"), "", maxKernelCmdline))
	case strings.IndexByte(cmd, 0) >= 0:
		errs = append(errs, field.Invalid(p.Child("cmdline"), cmd, "must not contain NUL bytes"))
	}
	return errs
}

// validateBootloader: at most one of bios and efi (an empty bootloader is
// bios). secure_boot lives inside efi, so it cannot be asked of BIOS.
// EFI with kernel_boot is refused: the kernel would be handed to OVMF
// through fw_cfg, which needs an EFI-stub kernel and is not what efi asks
// for (booting the disk's own EFI loader); nothing here tests it.
func validateBootloader(bl *apiv1.Bootloader, kernelBoot bool, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if bl.GetBios() != nil && bl.GetEfi() != nil {
		errs = append(errs, field.Forbidden(p.Child("efi"), "may not be set together with bios; a VM boots through one firmware"))
	}
	if bl.GetEfi() != nil && kernelBoot {
		errs = append(errs, field.Forbidden(p.Child("efi"), "may not be set together with kernel_boot, which boots its kernel without a boot loader; remove kernel_boot to boot the disks through EFI"))
	}
	return errs
}

// BootsEFI reports whether spec boots from its disks through EFI
// firmware (OVMF): bootloader.efi is set and there is no kernel_boot.
// The node agent keeps an NVRAM file for such a VM; domxml asks libvirt
// for EFI firmware.
func BootsEFI(spec *apiv1.VirtualMachineInstanceSpec) bool {
	fw := spec.GetDomain().GetFirmware()
	return fw.GetBootloader().GetEfi() != nil && fw.GetKernelBoot() == nil
}

// NVRAMStorageClass is the storage class an EFI guest's variable store
// (NVRAM) lives on: the class of its persistent volumes when every one of
// them is on the same class other than local, so that the variables are
// wherever the volumes are (a VM that starts on any node of the class, or
// fails over, boots with its own boot entries); "" otherwise, for the
// VM's directory on its node. A change of the VM's volumes that changes
// this moves the NVRAM to a new, blank store: the old one is not copied.
func NVRAMStorageClass(spec *apiv1.VirtualMachineInstanceSpec) string {
	refs := StorageClassRefs(spec)
	if len(refs) != 1 || apiv1.HasLocalVolumes(spec) {
		return ""
	}
	return refs[0]
}
