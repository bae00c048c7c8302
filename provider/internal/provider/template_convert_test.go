package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// fmtBootloader renders a bootloader block for comparisons.
func fmtBootloader(b *bootloaderModel) string {
	if b == nil {
		return "<nil>"
	}
	out := "{"
	if b.BIOS != nil {
		out += " bios {}"
	}
	if b.EFI != nil {
		out += " efi { secure_boot = " + b.EFI.SecureBoot.String() + " }"
	}
	return out + " }"
}

// The bootloader block reaches the API as firmware.bootloader and comes
// back as written: secure_boot left out stays null, an explicit false
// stays false, an empty block stays empty.
func TestBootloaderRoundTrip(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		bl   *bootloaderModel
		want *apiv1.Bootloader
	}{
		{"none", nil, nil},
		{"empty", &bootloaderModel{}, &apiv1.Bootloader{}},
		{"bios", &bootloaderModel{BIOS: &biosModel{}}, &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}},
		{"efi", &bootloaderModel{EFI: &efiModel{SecureBoot: types.BoolNull()}}, &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}},
		{"efi secure boot off", &bootloaderModel{EFI: &efiModel{SecureBoot: types.BoolValue(false)}}, &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}},
		{"efi secure boot", &bootloaderModel{EFI: &efiModel{SecureBoot: types.BoolValue(true)}}, &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{SecureBoot: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fullModel(t)
			in.Boot = nil // efi boots the disks, not a kernel
			in.Bootloader = tc.bl
			vm, d := vmFromModel(ctx, &in)
			if d.HasError() {
				t.Fatal(d)
			}
			if got := vm.GetSpec().GetTemplate().GetSpec().GetDomain().GetFirmware().GetBootloader(); !proto.Equal(got, tc.want) {
				t.Errorf("API bootloader %v, want %v", got, tc.want)
			}
			out, d := vmToModel(ctx, stored(t, vm), nil, readOptions{prior: &in})
			if d.HasError() {
				t.Fatal(d)
			}
			if got, want := fmtBootloader(out.Bootloader), fmtBootloader(tc.bl); got != want {
				t.Errorf("read back %s, want %s", got, want)
			}
		})
	}
	// An import (no prior state) shows secure_boot only when it is on.
	vm := stored(t, &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Name: "imp", Namespace: "default"},
		Spec: &apiv1.VirtualMachineSpec{RunStrategy: "Always", Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "1Gi"}, Firmware: &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}},
		}}},
	})
	out, d := vmToModel(ctx, vm, nil, readOptions{})
	if d.HasError() {
		t.Fatal(d)
	}
	if got := fmtBootloader(out.Bootloader); got != "{ efi { secure_boot = <null> } }" {
		t.Errorf("imported bootloader %s", got)
	}
}
