package domxml

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"
)

// The testdata pairs are libvirt 9.0's own output for the same EFI domain
// (q35, TCG): the target's inactive migratable XML (virsh dumpxml
// --inactive --migratable of the defined domain: the autoselection form)
// and the source's live XML once started (virsh dumpxml: resolved loader
// and template), with the NVRAM paths of two nodes put in.

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func parse(t *testing.T, x string) *libvirtxml.Domain {
	t.Helper()
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		t.Fatal(err)
	}
	return &d
}

// withoutOS is the domain with its <os> and SMM feature dropped, for
// checking that nothing else changed.
func withoutOS(t *testing.T, x string) string {
	t.Helper()
	d := parse(t, x)
	d.OS = nil
	if d.Features != nil {
		d.Features.SMM = nil
	}
	out, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

const (
	targetNVRAM = "/var/lib/virtplane/node-b/vms/5d1e0f2a-0000-4000-8000-0000000000aa/nvram.fd"
	sourceNVRAM = "/var/lib/virtplane/node-a/vms/5d1e0f2a-0000-4000-8000-0000000000aa/nvram.fd"
)

func TestDestinationXMLCarriesTheResolvedFirmware(t *testing.T) {
	for _, tc := range []struct {
		name, files              string
		loader, template, secure string
	}{
		{"efi", "migrate_efi", "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd", ""},
		{"secure boot", "migrate_efi_secure_boot", "/usr/share/OVMF/OVMF_CODE_4M.ms.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd", "yes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dest, src := readTestdata(t, tc.files+"_target.xml"), readTestdata(t, tc.files+"_source.xml")
			if !strings.Contains(src, sourceNVRAM) || !strings.Contains(dest, targetNVRAM) {
				t.Fatal("testdata without the two nodes' NVRAM paths")
			}
			out, err := DestinationXML(dest, src)
			if err != nil {
				t.Fatal(err)
			}
			os := parse(t, out).OS
			if os.Firmware != "" || os.FirmwareInfo != nil {
				t.Errorf("firmware autoselection left in: firmware=%q %+v", os.Firmware, os.FirmwareInfo)
			}
			want := libvirtxml.DomainLoader{Path: tc.loader, Readonly: "yes", Type: "pflash", Secure: tc.secure}
			if os.Loader == nil || *os.Loader != want {
				t.Errorf("loader = %+v, want %+v", os.Loader, want)
			}
			if os.NVRam == nil || os.NVRam.NVRam != targetNVRAM || os.NVRam.Template != tc.template || os.NVRam.Source != nil {
				t.Errorf("nvram = %+v, want the target's path %s from template %s", os.NVRam, targetNVRAM, tc.template)
			}
			if os.Type == nil || os.Type.Machine != "pc-q35-7.2" || len(os.BootDevices) != 1 {
				t.Errorf("the rest of <os> changed: %+v", os)
			}
			if withoutOS(t, out) != withoutOS(t, dest) {
				t.Errorf("more than <os> changed:\n%s\nwant\n%s", withoutOS(t, out), withoutOS(t, dest))
			}
			if tc.secure == "yes" {
				if f := parse(t, out).Features; f == nil || f.SMM == nil || f.SMM.State != "on" {
					t.Errorf("secure boot firmware without SMM: %+v", f)
				}
			}
		})
	}
}

// A destination built without SMM gets it when the source's firmware
// needed it (libvirt turned it on there).
func TestDestinationXMLTurnsOnSMMLikeTheSource(t *testing.T) {
	d := parse(t, readTestdata(t, "migrate_efi_secure_boot_target.xml"))
	d.Features.SMM = nil
	dest, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out, err := DestinationXML(dest, readTestdata(t, "migrate_efi_secure_boot_source.xml"))
	if err != nil {
		t.Fatal(err)
	}
	if f := parse(t, out).Features; f.SMM == nil || f.SMM.State != "on" {
		t.Fatalf("SMM = %+v, want on", f.SMM)
	}
}

// An NVRAM on RBD stays the target's network source (the same image):
// only the loader and template come from the source.
func TestDestinationXMLKeepsAnRBDNVRAM(t *testing.T) {
	d := parse(t, readTestdata(t, "migrate_efi_target.xml"))
	rbd := &libvirtxml.DomainDiskSource{Network: &libvirtxml.DomainDiskSourceNetwork{
		Protocol: "rbd", Name: "vp/vm-5d1e0f2a-0000-4000-8000-0000000000aa-nvram",
		Hosts: []libvirtxml.DomainDiskSourceHost{{Name: "169.254.7.254", Port: "3300"}},
		Auth:  &libvirtxml.DomainDiskAuth{Username: "vp", Secret: &libvirtxml.DomainDiskSecret{Type: "ceph", Usage: "virtplane-ceph"}},
	}}
	d.OS.NVRam = &libvirtxml.DomainNVRam{Source: rbd}
	dest, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out, err := DestinationXML(dest, readTestdata(t, "migrate_efi_source.xml"))
	if err != nil {
		t.Fatal(err)
	}
	os := parse(t, out).OS
	if os.NVRam == nil || strings.TrimSpace(os.NVRam.NVRam) != "" || os.NVRam.Source == nil || os.NVRam.Source.Network == nil ||
		os.NVRam.Source.Network.Name != rbd.Network.Name || os.NVRam.Source.Network.Auth.Secret.Usage != "virtplane-ceph" {
		t.Fatalf("nvram = %+v, want the rbd image with its auth", os.NVRam)
	}
	if os.Loader == nil || os.Loader.Path != "/usr/share/OVMF/OVMF_CODE_4M.fd" || os.NVRam.Template != "/usr/share/OVMF/OVMF_VARS_4M.fd" {
		t.Fatalf("loader %+v, template %q", os.Loader, os.NVRam.Template)
	}
	if !strings.Contains(out, `<nvram type="network" template="/usr/share/OVMF/OVMF_VARS_4M.fd">`) {
		t.Errorf("nvram element not of type network:\n%s", out)
	}
}

func TestDestinationXMLLeavesOtherDomainsAlone(t *testing.T) {
	bios := `<domain type="qemu"><name>d</name><os><type arch="x86_64" machine="q35">hvm</type></os></domain>`
	for name, tc := range map[string]struct{ dest, src string }{
		"bios":             {bios, bios},
		"empty":            {"<domain/>", bios},
		"resolved already": {readTestdata(t, "migrate_efi_source.xml"), readTestdata(t, "migrate_efi_source.xml")},
	} {
		out, err := DestinationXML(tc.dest, tc.src)
		if err != nil || out != tc.dest {
			t.Errorf("%s: changed (%v):\n%s", name, err, out)
		}
	}
}

// What would crash the target's libvirtd, or start it without firmware,
// is refused before libvirt sees it.
func TestDestinationXMLRefusesWhatCannotWork(t *testing.T) {
	bios := `<domain type="qemu"><name>d</name><os><type arch="x86_64" machine="q35">hvm</type></os></domain>`
	efiTarget, efiSource := readTestdata(t, "migrate_efi_target.xml"), readTestdata(t, "migrate_efi_source.xml")
	noNVRAM := parse(t, efiTarget)
	noNVRAM.OS.NVRam = nil
	noNVRAMXML, err := noNVRAM.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct{ dest, src, want string }{
		"efi target, bios source": {efiTarget, bios, "firmware='efi'"},
		"bios target, efi source": {bios, efiSource, "asks for none"},
		"efi without nvram":       {noNVRAMXML, efiSource, "without an NVRAM store"},
		"bad destination":         {"<domain", efiSource, "parse the destination XML"},
		"bad source":              {efiTarget, "<domain", "parse the source domain's XML"},
	} {
		if _, err := DestinationXML(tc.dest, tc.src); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.want)
		}
	}
}
