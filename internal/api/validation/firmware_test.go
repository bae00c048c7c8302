package validation

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const bootloader = domain + ".firmware.bootloader"

func TestValidateBootloader(t *testing.T) {
	setBL := func(bl *apiv1.Bootloader) func(vm *apiv1.VirtualMachine) {
		return func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Firmware = &apiv1.Firmware{Bootloader: bl} }
	}
	kernel := &apiv1.KernelBoot{Kernel: "vmlinuz"}
	runVMCases(t, []vmCase{
		{name: "bios", mutate: setBL(&apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}})},
		{name: "efi", mutate: setBL(&apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}})},
		{name: "efi secure boot", mutate: setBL(&apiv1.Bootloader{Efi: &apiv1.EFIBootloader{SecureBoot: true}})},
		{name: "empty bootloader is bios", mutate: setBL(&apiv1.Bootloader{})},
		{name: "bios and efi", mutate: setBL(&apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}, Efi: &apiv1.EFIBootloader{SecureBoot: true}}),
			want: []want{forbidden(bootloader + ".efi")}},
		{name: "bios with kernel boot", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: kernel, Bootloader: &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}}
		}},
		{name: "efi with kernel boot", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: kernel, Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}
		}, want: []want{forbidden(bootloader + ".efi")}},
		{name: "kernel boot errors still reported with a bootloader", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{}, Bootloader: &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}}
		}, want: []want{required(kboot + ".kernel")}},
		// Nothing to boot is the firmware's to find out, as in KubeVirt.
		{name: "no kernel boot and no disks", mutate: func(vm *apiv1.VirtualMachine) {
			s := tspecOf(vm)
			s.Domain.Devices.Disks, s.Volumes = nil, nil
			s.Domain.Firmware = &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}
		}},
	})
}

func TestBootsEFI(t *testing.T) {
	for _, tc := range []struct {
		name string
		fw   *apiv1.Firmware
		want bool
	}{
		{"no firmware", nil, false},
		{"bios", &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}}, false},
		{"empty bootloader", &apiv1.Firmware{Bootloader: &apiv1.Bootloader{}}, false},
		{"efi", &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}, true},
		{"efi with kernel boot", &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "k"}, Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}, false},
	} {
		spec := &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Firmware: tc.fw}}
		if got := BootsEFI(spec); got != tc.want {
			t.Errorf("%s: BootsEFI = %v, want %v", tc.name, got, tc.want)
		}
	}
	if BootsEFI(nil) {
		t.Error("BootsEFI(nil) = true")
	}
}

func TestNVRAMStorageClass(t *testing.T) {
	vol := func(name, class string) *apiv1.Volume {
		return &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: class}}
	}
	image := &apiv1.Volume{Name: "img", Image: &apiv1.ImageVolume{Name: "disk.qcow2"}}
	for _, tc := range []struct {
		name string
		vols []*apiv1.Volume
		want string
	}{
		{"no volumes", nil, ""},
		{"an image only", []*apiv1.Volume{image}, ""},
		{"local", []*apiv1.Volume{vol("a", "")}, ""},
		{"local by name", []*apiv1.Volume{vol("a", apiv1.StorageClassLocal)}, ""},
		{"one class", []*apiv1.Volume{vol("a", "ceph"), vol("b", "ceph"), image}, "ceph"},
		{"a class and local", []*apiv1.Volume{vol("a", "ceph"), vol("b", "")}, ""},
		{"two classes", []*apiv1.Volume{vol("a", "ceph"), vol("b", "nfs")}, ""},
	} {
		if got := NVRAMStorageClass(&apiv1.VirtualMachineInstanceSpec{Volumes: tc.vols}); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
