package firmware

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"
)

// TestMatchesLibvirt starts (paused) a domain shaped as virtplane's EFI
// guests are (launcher/internal/domxml: firmware by feature, q35) on the
// libvirtd of VIRTPLANE_TEST_LIBVIRT_URI, with Secure Boot and without,
// and checks that libvirt resolved the loader and VARS template the
// Resolver names from the same host's descriptors.
func TestMatchesLibvirt(t *testing.T) {
	uri := os.Getenv("VIRTPLANE_TEST_LIBVIRT_URI")
	if uri == "" {
		t.Skip("VIRTPLANE_TEST_LIBVIRT_URI is not set")
	}
	if _, err := exec.LookPath("virsh"); err != nil {
		t.Skip("virsh not installed")
	}
	// QEMU runs as its own user: it must reach the NVRAM's directory.
	dir, err := os.MkdirTemp("", "virtplane-fw-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	r := &Resolver{}
	for _, secure := range []bool{false, true} {
		want, err := r.EFI(context.Background(), secure)
		if err != nil {
			t.Fatal(err)
		}
		got := libvirtPicks(t, uri, dir, secure)
		if got.Loader == nil || got.Loader.Path != want.Executable || got.NVRam == nil || got.NVRam.Template != want.NVRAMTemplate {
			t.Errorf("secure boot %v: libvirt picked loader %+v, NVRAM %+v; the resolver %+v", secure, got.Loader, got.NVRam, want)
		} else {
			t.Logf("secure boot %v: both pick %s with %s (%s)", secure, want.Executable, want.NVRAMTemplate, filepath.Base(want.Descriptor))
		}
	}
}

// libvirtPicks starts a transient paused domain asking for EFI firmware
// by feature and returns its live <os>.
func libvirtPicks(t *testing.T, uri, dir string, secure bool) *libvirtxml.DomainOS {
	t.Helper()
	yn := yesNo(secure)
	name := "vptest-fw-" + strings.ToLower(rand.Text()[:8])
	dom := libvirtxml.Domain{
		Type: "qemu", Name: name,
		Memory: &libvirtxml.DomainMemory{Value: 64, Unit: "MiB"},
		OS: &libvirtxml.DomainOS{
			Type:     &libvirtxml.DomainOSType{Arch: Arch, Machine: MachineAlias, Type: "hvm"},
			Firmware: "efi",
			FirmwareInfo: &libvirtxml.DomainOSFirmwareInfo{Features: []libvirtxml.DomainOSFirmwareFeature{
				{Name: "enrolled-keys", Enabled: yn}, {Name: "secure-boot", Enabled: yn}}},
			NVRam: &libvirtxml.DomainNVRam{NVRam: filepath.Join(dir, name+".fd")},
		},
		Features: &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}},
		Devices:  &libvirtxml.DomainDeviceList{MemBalloon: &libvirtxml.DomainMemBalloon{Model: "none"}},
	}
	if secure {
		dom.Features.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
	}
	x, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, name+".xml")
	if err := os.WriteFile(file, []byte(x), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	virsh := func(args ...string) string {
		out, err := exec.CommandContext(ctx, "virsh", append([]string{"-c", uri}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("virsh %s: %v: %s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	virsh("create", "--paused", file)
	defer func() {
		if out, err := exec.Command("virsh", "-c", uri, "destroy", name).CombinedOutput(); err != nil {
			t.Errorf("virsh destroy %s: %v: %s", name, err, out)
		}
	}()
	var live libvirtxml.Domain
	if err := live.Unmarshal(virsh("dumpxml", name)); err != nil {
		t.Fatal(err)
	}
	return live.OS
}
