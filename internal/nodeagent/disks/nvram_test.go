package disks

import (
	"context"
	"os"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// An EFI guest's NVRAM is named in its VM's directory (made, with its
// vm.json, so that the VM directory collector removes it with the VM),
// or in a bare VMI's own; BIOS and kernel boot get none.
func TestPrepareNVRAMPath(t *testing.T) {
	const vmUID = "5d1e0f2a-0000-4000-8000-0000000000aa"
	layout := nodedir.Layout{Root: t.TempDir()}
	p := New(Options{ImageDir: t.TempDir(), Layout: layout})
	vmDir, err := layout.VMDir(vmUID)
	if err != nil {
		t.Fatal(err)
	}
	vmiDir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	efi := &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}
	for _, tc := range []struct {
		name  string
		fw    *apiv1.Firmware
		vmUID string
		want  string
	}{
		{"efi VM", efi, vmUID, nodedir.NVRAMPath(vmDir)},
		{"efi bare VMI", efi, "", nodedir.NVRAMPath(vmiDir)},
		{"bios", &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}}, vmUID, ""},
		{"default firmware", nil, vmUID, ""},
		{"kernel boot", &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "vmlinuz"}}, vmUID, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vmi := &apiv1.VirtualMachineInstance{
				Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
				Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Firmware: tc.fw}},
			}
			rec := &state.VMI{UID: uid1, VMUID: tc.vmUID, Namespace: "default", Name: "vm", Dir: vmiDir}
			opts, err := p.Prepare(context.Background(), vmi, rec)
			if err != nil {
				t.Fatal(err)
			}
			if opts.NvramPath != tc.want {
				t.Errorf("NvramPath = %q, want %q", opts.NvramPath, tc.want)
			}
		})
	}
	m, err := nodedir.ReadVMMeta(vmDir)
	if err != nil || m.UID != vmUID || m.Name != "vm" {
		t.Errorf("VM dir meta = %+v, %v", m, err)
	}
	// The file itself is libvirt's to make from the template.
	if _, err := os.Stat(nodedir.NVRAMPath(vmDir)); !os.IsNotExist(err) {
		t.Errorf("Prepare made the NVRAM file: %v", err)
	}
}
