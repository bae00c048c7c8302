package adopt

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

var testRules = Rules{Dirs: []string{"/srv/adopt"}, ImageDir: "/var/lib/virtplane/images"}

func mapFile(t *testing.T, name string, rules Rules) *Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	r, err := Map(string(b), rules)
	if err != nil {
		t.Fatalf("Map(%s): %v", name, err)
	}
	return r
}

// refusal returns the reason of the refusal of element, "" when there is
// none.
func refusal(r *Result, element string) string {
	var reasons []string
	for _, f := range r.Refusals {
		if f.GetElement() == element {
			reasons = append(reasons, f.GetReason())
		}
	}
	return strings.Join(reasons, "; ")
}

func hasNote(r *Result, substr string) bool {
	return slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, substr) })
}

// A domain as virt-install makes it maps whole: its disk and NIC, with
// the desktop devices it had noted as dropped.
func TestVirtInstallDomainMaps(t *testing.T) {
	r := mapFile(t, "virt-install.xml", testRules)
	if len(r.Refusals) > 0 {
		t.Fatalf("refusals: %v", r.Refusals)
	}
	want := &apiv1.VirtualMachineInstanceSpec{
		Domain: &apiv1.DomainSpec{
			Cpu:    &apiv1.CPU{Sockets: 1, Cores: 2, Threads: 1},
			Memory: &apiv1.Memory{Guest: "2Gi"},
			Devices: &apiv1.Devices{
				Disks:      []*apiv1.Disk{{Name: "vda", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
				Interfaces: []*apiv1.Interface{{Name: "nic0", Model: "virtio", MacAddress: "52:54:00:6b:3c:58"}},
			},
			Firmware: &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}},
		},
		Volumes:  []*apiv1.Volume{{Name: "vda", Persistent: &apiv1.PersistentVolume{}}},
		Networks: []*apiv1.Network{{Name: "nic0", Network: &apiv1.LibvirtNetwork{Name: "default"}}},
	}
	if !proto.Equal(r.Spec, want) {
		t.Errorf("spec:\n%s\nwant:\n%s", prototext.Format(r.Spec), prototext.Format(want))
	}
	if want := []Disk{{Name: "vda", Path: "/srv/adopt/debian12.qcow2", Format: "qcow2"}}; !slices.Equal(r.Disks, want) {
		t.Errorf("disks %v, want %v", r.Disks, want)
	}
	if !r.SerialPty {
		t.Error("the serial pty was not seen")
	}
	for _, n := range []string{"graphics", "video card", "sound cards", "USB redirection", "com.redhat.spice.0", "empty CD-ROM", "CPU model"} {
		if !hasNote(r, n) {
			t.Errorf("no note about %q in %q", n, r.Notes)
		}
	}
	if hasNote(r, "guest_agent") {
		t.Errorf("the guest agent channel is noted as dropped, but virtplane gives one: %q", r.Notes)
	}
	r.SetSize("vda", 21474836480)
	if got := r.Spec.GetVolumes()[0].GetPersistent().GetSize(); got != "20Gi" {
		t.Errorf("size %q after SetSize", got)
	}
}

// A domain booting a kernel from the image directory maps to kernel_boot
// with image names; IDE disks and a NIC without a model are noted.
func TestKernelBootDomainMaps(t *testing.T) {
	r := mapFile(t, "kernel-boot.xml", testRules)
	if len(r.Refusals) > 0 {
		t.Fatalf("refusals: %v", r.Refusals)
	}
	fw := r.Spec.GetDomain().GetFirmware()
	if want := (&apiv1.KernelBoot{Kernel: "vmlinux", Initrd: "initrd.img", Cmdline: "console=ttyS0 virtplane.persist=/dev/vda"}); !proto.Equal(fw.GetKernelBoot(), want) {
		t.Errorf("kernel boot %v, want %v", fw.GetKernelBoot(), want)
	}
	if fw.GetBootloader() != nil {
		t.Errorf("bootloader %v with a kernel boot", fw.GetBootloader())
	}
	if got := r.Spec.GetDomain().GetMemory().GetGuest(); got != "160Mi" {
		t.Errorf("memory %q, want 160Mi", got)
	}
	disks := r.Spec.GetDomain().GetDevices().GetDisks()
	if len(disks) != 2 || disks[0].GetSerial() != "data-1" || disks[1].GetDisk().GetBus() != "sata" || disks[1].GetBootOrder() != 2 {
		t.Errorf("disks %v", disks)
	}
	nets := r.Spec.GetNetworks()
	if len(nets) != 2 || nets[0].GetUser() == nil || nets[1].GetBridge().GetBridge() != "br0" {
		t.Errorf("networks %v", nets)
	}
	if m := r.Spec.GetDomain().GetDevices().GetInterfaces()[1].GetModel(); m != "rtl8139" {
		t.Errorf("a NIC without a model maps to %q, want libvirt's default rtl8139", m)
	}
	for _, n := range []string{"pc-i440fx-7.2 becomes q35", "bus ide becomes sata", `model "" becomes rtl8139`} {
		if !hasNote(r, n) {
			t.Errorf("no note about %q in %q", n, r.Notes)
		}
	}
	if want := []Disk{{"vda", "/srv/adopt/legacy/data.raw", "raw"}, {"hdb", "/srv/adopt/legacy/old.qcow2", "qcow2"}}; !slices.Equal(r.Disks, want) {
		t.Errorf("disks %v, want %v", r.Disks, want)
	}
}

// An EFI domain with Secure Boot keeps both, names its NVRAM for import,
// and notes what changes.
func TestEFIDomainMaps(t *testing.T) {
	r := mapFile(t, "efi.xml", testRules)
	if len(r.Refusals) > 0 {
		t.Fatalf("refusals: %v", r.Refusals)
	}
	if efi := r.Spec.GetDomain().GetFirmware().GetBootloader().GetEfi(); efi == nil || !efi.GetSecureBoot() {
		t.Errorf("bootloader %v, want efi with secure boot", r.Spec.GetDomain().GetFirmware().GetBootloader())
	}
	if r.NVRAM != "/var/lib/libvirt/qemu/nvram/win-efi_VARS.fd" {
		t.Errorf("nvram %q", r.NVRAM)
	}
	if cpu := r.Spec.GetDomain().GetCpu(); cpu.GetSockets() != 1 || cpu.GetCores() != 2 || cpu.GetThreads() != 2 {
		t.Errorf("cpu %v, want 1 socket, 2 cores, 2 threads", cpu)
	}
	if got := r.Spec.GetDomain().GetMemory().GetGuest(); got != "4Gi" {
		t.Errorf("memory %q", got)
	}
	for _, n := range []string{"balloon", "vCPU hotplug", "localtime", `on_reboot "destroy"`, "Hyper-V", `"e1000e" becomes e1000`, "no serial console"} {
		if !hasNote(r, n) {
			t.Errorf("no note about %q in %q", n, r.Notes)
		}
	}
}

// A hostile domain: every element that would reach past the guest (host
// devices, host files, arbitrary QEMU arguments, other paths) is refused
// by name, and nothing of it reaches the spec.
func TestHostileDomainIsRefusedElementByElement(t *testing.T) {
	r := mapFile(t, "hostile.xml", testRules)
	want := map[string]string{
		"{1.0}commandline":                         "never adopted",
		"idmap":                                    "containers",
		"launchSecurity":                           "memory encryption",
		"os.loader":                                "not one the distribution installed",
		"os.kernel":                                "not in the node image directory",
		"devices.disk[0] (vda)":                    "not an absolute, clean path",
		"devices.disk[1] (vdb)":                    "host block device",
		"devices.disk[2] (vdc)":                    "network disk",
		"devices.disk[3] (vdd).source.slices":      "changes what the file holds",
		"devices.disk[4] (vde)":                    "backing chain",
		"devices.disk[5] (vdf)":                    `format "vmdk"`,
		"devices.disk[6] (vdg)":                    "outside the directories",
		"devices.disk[7] (vdh)":                    "shared between domains",
		"devices.disk[8] (../../x)":                "not a name such as vda",
		"devices.disk[9] (sdz)":                    "not in the node image directory",
		"devices.interface[0] (52:54:00:00:00:01)": "macvtap",
		"devices.interface[1] (52:54:00:00:00:02)": "Open vSwitch",
		"devices.interface[2]":                     "passt",
		"devices.hostdev":                          "passed through",
		"devices.filesystem":                       "host directory",
		"devices.tpm":                              "TPM",
		"devices.frobnicator":                      "unknown device",
	}
	for el, reason := range want {
		if got := refusal(r, el); !strings.Contains(got, reason) {
			t.Errorf("refusal of %s: %q, want it to say %q", el, got, reason)
		}
	}
	if got := refusal(r, "devices.disk[8] (../../x)"); !strings.Contains(got, `bus "usb"`) {
		t.Errorf("a usb disk: %q", got)
	}
	if n := len(r.Spec.GetVolumes()) + len(r.Spec.GetNetworks()) + len(r.Disks); n != 0 {
		t.Errorf("a refused element reached the spec: volumes %v, networks %v, disks %v", r.Spec.GetVolumes(), r.Spec.GetNetworks(), r.Disks)
	}
	if r.Spec.GetDomain().GetFirmware().GetKernelBoot() != nil {
		t.Error("a kernel outside the image directory reached the spec")
	}
	if !hasNote(r, "not a pty") {
		t.Errorf("the tcp serial port is not noted: %q", r.Notes)
	}
}

// No adoption directory: every disk is refused and says which flag opens
// one.
func TestNoAdoptDirRefusesDisks(t *testing.T) {
	r := mapFile(t, "virt-install.xml", Rules{ImageDir: testRules.ImageDir})
	if got := refusal(r, "devices.disk[0] (vda)"); !strings.Contains(got, "--adopt-dir") {
		t.Errorf("refusal %q, want it to name --adopt-dir", got)
	}
}

// A disk file in the image directory is never a volume: images are
// shared bases.
func TestDiskInImageDirIsRefused(t *testing.T) {
	x := `<domain type='kvm'><name>a</name><memory>65536</memory><os><type>hvm</type></os><devices>
<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='/var/lib/virtplane/images/base.qcow2'/><target dev='vda' bus='virtio'/></disk>
</devices></domain>`
	r, err := Map(x, Rules{Dirs: []string{"/var/lib/virtplane"}, ImageDir: testRules.ImageDir})
	if err != nil {
		t.Fatal(err)
	}
	if got := refusal(r, "devices.disk[0] (vda)"); !strings.Contains(got, "image directory") {
		t.Errorf("refusal %q", got)
	}
}

func TestNotADomain(t *testing.T) {
	for name, x := range map[string]string{
		"empty":    "",
		"network":  "<network><name>default</name></network>",
		"garbage":  "<domain><name>x</name",
		"big":      "<domain>" + strings.Repeat(" ", maxDomainXML) + "</domain>",
		"ns root":  "<x:domain xmlns:x='urn:x'/>",
		"two open": "<domain><devices><disk></devices></domain>",
	} {
		if _, err := Map(x, testRules); !errors.Is(err, ErrNotADomain) {
			t.Errorf("%s: err %v, want ErrNotADomain", name, err)
		}
	}
}

// Memory in every unit libvirt takes; units it does not are refused.
func TestMemoryUnits(t *testing.T) {
	for unit, want := range map[string]string{"KiB": "64Mi", "k": "64Mi", "": "64Mi", "MiB": "64Gi", "M": "64Gi", "b": "64Ki", "KB": "64000Ki"} {
		x := `<domain type='qemu'><name>a</name><memory unit='` + unit + `'>65536</memory><os><type>hvm</type></os></domain>`
		r, err := Map(x, testRules)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Spec.GetDomain().GetMemory().GetGuest(); got != want {
			t.Errorf("unit %q: %q, want %q", unit, got, want)
		}
	}
	r, _ := Map(`<domain type='qemu'><name>a</name><memory unit='parsecs'>1</memory><os><type>hvm</type></os></domain>`, testRules)
	if !strings.Contains(refusal(r, "memory"), "unknown unit") {
		t.Errorf("refusals %v", r.Refusals)
	}
	r, _ = Map(`<domain type='qemu'><name>a</name><memory unit='TiB'>18446744073709551615</memory><os><type>hvm</type></os></domain>`, testRules)
	if refusal(r, "memory") == "" {
		t.Errorf("an absurd memory size is not refused: %v", r.Spec.GetDomain().GetMemory())
	}
}

func TestCheckFile(t *testing.T) {
	root := t.TempDir()
	allowed := filepath.Join(root, "adopt")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{allowed, outside, filepath.Join(allowed, "dir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(allowed, "disk.raw"))
	write(filepath.Join(outside, "secret"))
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(allowed, "link.raw")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(allowed, "disk.raw"), filepath.Join(allowed, "inner.raw")); err != nil {
		t.Fatal(err)
	}
	dirs, err := CheckDirs([]string{allowed})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CheckFile(filepath.Join(allowed, "disk.raw"), dirs); err != nil || got != filepath.Join(dirs[0], "disk.raw") {
		t.Errorf("a file in the directory: %q, %v", got, err)
	}
	if got, err := CheckFile(filepath.Join(allowed, "inner.raw"), dirs); err != nil || got != filepath.Join(dirs[0], "disk.raw") {
		t.Errorf("a link to a file in the directory: %q, %v (want the real path)", got, err)
	}
	for _, p := range []string{
		filepath.Join(allowed, "link.raw"), // points out
		filepath.Join(allowed, "dir"),      // not a file
		filepath.Join(allowed, "missing"),
		"/dev/null",
	} {
		if got, err := CheckFile(p, dirs); !errors.Is(err, ErrNotAdoptable) {
			t.Errorf("CheckFile(%s) = %q, %v; want ErrNotAdoptable", p, got, err)
		}
	}
}

func TestCheckDirs(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "data")
	if err := os.MkdirAll(filepath.Join(data, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dirs []string
		ok   bool
	}{
		{[]string{root + "/data/sub"}, false}, // inside the data dir
		{[]string{root}, false},               // around it
		{[]string{"relative"}, false},
		{[]string{"/"}, false},
		{[]string{root + "/missing"}, false},
	} {
		if _, err := CheckDirs(c.dirs, data); (err == nil) != c.ok {
			t.Errorf("CheckDirs(%v): %v", c.dirs, err)
		}
	}
	other := filepath.Join(root, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := CheckDirs([]string{other}, data); err != nil || len(got) != 1 {
		t.Errorf("CheckDirs(other) = %v, %v", got, err)
	}
}

// Fuzz: no domain XML makes Map panic, and whatever it maps stays inside
// the rules (every disk file lexically in an allowed directory, every
// name a plain one).
func FuzzMap(f *testing.F) {
	for _, name := range []string{"virt-install.xml", "kernel-boot.xml", "hostile.xml", "efi.xml"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, x string) {
		r, err := Map(x, testRules)
		if err != nil {
			return
		}
		for _, d := range r.Disks {
			if !inAny(testRules.Dirs, d.Path) || filepath.Clean(d.Path) != d.Path || !diskNameRegexp.MatchString(d.Name) {
				t.Fatalf("disk %+v escaped the rules", d)
			}
		}
	})
}
