package cloudinit

// Boots the test guest (internal/testguest) with a seed ISO on a SATA
// CD-ROM and checks that Linux's isofs shows the files under their real
// names with their exact contents. Runs only when VIRTPLANE_TEST_LIBVIRT_URI
// and VIRTPLANE_TEST_GUEST_DIR are set (make test-unit sets both).

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Under TCG the guest boots in ~5 s alone, several times that when other
// packages' tests boot guests on the same cores.
const guestTimeout = 120 * time.Second

func TestGuestReadsSeed(t *testing.T) {
	uri := os.Getenv(testguest.EnvLibvirtURI)
	if uri == "" || os.Getenv(testguest.EnvDir) == "" {
		t.Skipf("%s and %s must be set; this test boots the test guest under libvirt", testguest.EnvLibvirtURI, testguest.EnvDir)
	}
	guestDir, err := testguest.Dir()
	if err != nil {
		t.Fatal(err)
	}
	seed := testSeed
	seed.UserData += "# ünïcode ✓, tabs\tand \"quotes\"\n"
	md, err := seed.MetaData()
	if err != nil {
		t.Fatal(err)
	}
	// The real seed, then each extension alone: Linux uses Rock Ridge when
	// it is there and Joliet otherwise, and the ISO 9660 names
	// ("USER_DAT.") would not be found, so each variant proves its
	// extension.
	variants := map[string]isoOptions{
		"both":      {},
		"rockridge": {noJoliet: true},
		"joliet":    {noRockRidge: true},
	}
	for name, opt := range variants {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var img bytes.Buffer
			if name == "both" {
				if err := BuildNoCloudISO(&img, seed); err != nil {
					t.Fatal(err)
				}
			} else {
				opt.volumeID, opt.modTime = VolumeLabel, testTime
				files := []isoFile{{name: MetaDataFile, data: []byte(md)}, {name: UserDataFile, data: []byte(seed.UserData)}}
				if err := writeISO(&img, files, opt); err != nil {
					t.Fatal(err)
				}
			}
			console := bootWithCDROM(t, uri, guestDir, img.Bytes())
			if got, ok := testguest.Between(console, testguest.MarkerUserdataBegin, testguest.MarkerUserdataEnd); !ok || got != seed.UserData {
				t.Errorf("user-data = %q (complete: %v), want %q; console:\n%s", got, ok, seed.UserData, console)
			}
			if got, _ := testguest.Between(console, testguest.MarkerMetadataBegin, testguest.MarkerMetadataEnd); got != md {
				t.Errorf("meta-data = %q, want %q", got, md)
			}
			if w, ok := testguest.FindMarker(console, testguest.MarkerWarning); ok {
				t.Errorf("guest warned: %s", w)
			}
		})
	}
}

// bootWithCDROM runs the guest with iso as a SATA CD-ROM until it powers
// itself off after printing the cidata files, and returns its console.
func bootWithCDROM(t *testing.T, uri, guestDir string, iso []byte) string {
	t.Helper()
	dir := testguest.ReachableDir(t, "virtplane-cloudinit-")
	isoPath, consolePath := filepath.Join(dir, "cidata.iso"), filepath.Join(dir, "console.log")
	if err := os.WriteFile(isoPath, iso, 0o644); err != nil {
		t.Fatal(err)
	}
	name := testguest.DomainName(t, "vp-cloudinit")
	cmdline := testguest.Cmdline(testguest.CIData(), testguest.PoweroffAfter(0))
	xml, err := testguest.Domain(name, guestDir, consolePath, cmdline, cdrom(isoPath)).Marshal()
	if err != nil {
		t.Fatal(err)
	}
	xmlPath := filepath.Join(dir, "domain.xml")
	if err := os.WriteFile(xmlPath, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("virsh", "-c", uri, "create", xmlPath).CombinedOutput(); err != nil {
		t.Fatalf("virsh create: %v: %s", err, out)
	}
	// Transient: destroy removes it; usually it is gone already.
	t.Cleanup(func() { exec.Command("virsh", "-c", uri, "destroy", name).Run() })

	var console string
	testutil.EventuallyNoError(t, guestTimeout, "guest "+name+" to power off", func() error {
		b, _ := os.ReadFile(consolePath) // absent until QEMU writes
		console = string(b)
		if _, ok := testguest.FindMarker(console, testguest.MarkerPoweroff); ok {
			return nil
		}
		return fmt.Errorf("console:\n%s", console)
	})
	return console
}

// cdrom attaches the seed ISO read-only on a SATA CD-ROM.
func cdrom(iso string) libvirtxml.DomainDisk {
	return libvirtxml.DomainDisk{
		Device:   "cdrom",
		Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: iso}},
		Target:   &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "sata"},
		ReadOnly: &libvirtxml.DomainDiskReadOnly{},
	}
}
