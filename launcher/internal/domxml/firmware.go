package domxml

import (
	"errors"
	"fmt"
	"path/filepath"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// buildOS picks how the guest boots: its kernel directly (kernel_boot),
// or its disks through SeaBIOS (the default) or OVMF (bootloader.efi).
func buildOS(spec *apiv1.VirtualMachineInstanceSpec, opts *launcherpb.SyncOptions) (*libvirtxml.DomainOS, error) {
	o := &libvirtxml.DomainOS{
		// q35 gives the guest AHCI for SATA cdroms and PCIe; KubeVirt uses
		// it too. OVMF's descriptors (secure boot ones only) match it.
		Type: &libvirtxml.DomainOSType{Arch: "x86_64", Machine: "q35", Type: "hvm"},
	}
	if opts.GetKernelPath() != "" {
		if validation.BootsEFI(spec) || hasNVRAM(opts) {
			// Validation refuses efi with kernel_boot; this is the node
			// agent and the spec disagreeing.
			return nil, errors.New("kernel boot cannot use EFI firmware or an NVRAM file")
		}
		o.Kernel = opts.GetKernelPath()
		o.Initrd = opts.GetInitrdPath()
		o.Cmdline = opts.GetKernelCmdline()
		return o, nil
	}
	if opts.GetInitrdPath() != "" || opts.GetKernelCmdline() != "" {
		return nil, errors.New("initrd or kernel command line given without a kernel")
	}
	// Disks carry <boot order> (buildDisks); no <boot dev> here, libvirt
	// refuses both together.
	if !validation.BootsEFI(spec) {
		if hasNVRAM(opts) {
			return nil, errors.New("an NVRAM file is only for EFI firmware (bootloader.efi)")
		}
		return o, nil
	}
	efi := spec.GetDomain().GetFirmware().GetBootloader().GetEfi()
	nv, err := buildNVRAM(opts)
	if err != nil {
		return nil, err
	}
	// Firmware autoselection: libvirt picks the OVMF build from the host's
	// descriptors (/usr/share/qemu/firmware/*.json) that has the features
	// asked for, and copies that build's VARS template to the NVRAM path
	// when the file does not exist yet; an existing file (the VM's boot
	// entries) is used as it is. An RBD NVRAM is used as it is too: the
	// node agent made it from the template libvirt picks (package
	// firmware).
	o.Firmware = "efi"
	o.FirmwareInfo = &libvirtxml.DomainOSFirmwareInfo{Features: []libvirtxml.DomainOSFirmwareFeature{
		{Name: "enrolled-keys", Enabled: yesNo(efi.GetSecureBoot())},
		{Name: "secure-boot", Enabled: yesNo(efi.GetSecureBoot())},
	}}
	o.NVRam = nv
	return o, nil
}

func hasNVRAM(opts *launcherpb.SyncOptions) bool {
	return opts.GetNvramPath() != "" || opts.GetNvramRbd() != nil
}

// buildNVRAM is the guest's variable store: the node agent's file, or its
// image on an rbd class (a network NVRAM, authenticated like the class's
// disks).
func buildNVRAM(opts *launcherpb.SyncOptions) (*libvirtxml.DomainNVRam, error) {
	path, rbd := opts.GetNvramPath(), opts.GetNvramRbd()
	switch {
	case path != "" && rbd != nil:
		return nil, errors.New("an NVRAM file and an RBD NVRAM both given")
	case rbd != nil:
		net, err := rbdNetwork(rbd)
		if err != nil {
			return nil, fmt.Errorf("NVRAM: %w", err)
		}
		return &libvirtxml.DomainNVRam{Source: &libvirtxml.DomainDiskSource{Network: net}}, nil
	case path == "":
		// libvirt would make one under /var/lib/libvirt/qemu/nvram, named
		// after the domain, which outlives the VM: the node agent names it.
		return nil, errors.New("EFI firmware needs an NVRAM path from the node agent")
	case !filepath.IsAbs(path) || filepath.Clean(path) != path:
		return nil, fmt.Errorf("NVRAM path %q is not absolute and clean", path)
	}
	return &libvirtxml.DomainNVRam{NVRam: path}, nil
}

// needsSMM: OVMF's secure boot builds keep their variable store safe
// from the guest OS in SMM; the descriptors say requires-smm.
func needsSMM(spec *apiv1.VirtualMachineInstanceSpec) bool {
	return validation.BootsEFI(spec) && spec.GetDomain().GetFirmware().GetBootloader().GetEfi().GetSecureBoot()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// defaultBootDisk gives the first disk boot order 1 when the guest boots
// from its disks and none has a boot order (the API's rule, docs/
// guests.md): libvirt's own default would be <boot dev='hd'/>, which
// OVMF reads as "any disk, in its own order".
func defaultBootDisk(disks []libvirtxml.DomainDisk, kernelBoot bool) {
	if kernelBoot || len(disks) == 0 {
		return
	}
	for _, d := range disks {
		if d.Boot != nil {
			return
		}
	}
	disks[0].Boot = &libvirtxml.DomainDeviceBoot{Order: 1}
}
