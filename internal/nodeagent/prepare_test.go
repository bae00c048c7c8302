package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

func TestReadHostFacts(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"proc/meminfo":              "MemTotal:       16318464 kB\nMemFree:         1000 kB\n",
		"proc/cpuinfo":              "processor\t: 0\nflags\t\t: fpu vme de pse vmx sse\n\nprocessor\t: 1\nflags\t\t: fpu vmx\n",
		"proc/sys/kernel/osrelease": "6.1.0-18-amd64\n",
		"dev/kvm":                   "",
	}
	for p, c := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h, err := ReadHostFacts(root)
	if err != nil {
		t.Fatal(err)
	}
	if h.MemoryBytes != 16318464*1024 || h.KernelVersion != "6.1.0-18-amd64" || !h.KVMUsable || h.CPUs < 1 || h.Architecture == "" {
		t.Fatalf("facts %+v", h)
	}

	// Flags without /dev/kvm, and /dev/kvm without the flags: no KVM.
	os.Remove(filepath.Join(root, "dev/kvm"))
	if h, _ := ReadHostFacts(root); h.KVMUsable {
		t.Error("KVM usable without /dev/kvm")
	}
	writeFile(t, filepath.Join(root, "dev/kvm"))
	os.WriteFile(filepath.Join(root, "proc/cpuinfo"), []byte("flags\t: fpu sse\n"), 0o644)
	if h, _ := ReadHostFacts(root); h.KVMUsable {
		t.Error("KVM usable without vmx/svm")
	}
	os.WriteFile(filepath.Join(root, "proc/meminfo"), []byte("MemFree: 1 kB\n"), 0o644)
	if _, err := ReadHostFacts(root); err == nil {
		t.Error("meminfo without MemTotal accepted")
	}
}

func TestExecToolsDecodeOutput(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "virtplane-launcher")
	body := `#!/bin/sh
case "$1" in
probe) [ "$2" = --libvirt-uri ] && [ "$3" = "test:///default" ] && echo '{"libvirt_version":"10.0.0","qemu_version":"8.2.0","hostname":"h"}' ;;
list-domains) echo '[{"name":"default_a","uuid":"u","state":"Running","reason":"Booted","vmi_uid":"x","vmi_namespace":"default","vmi_name":"a"}]' ;;
*) echo "unknown command $1" >&2; exit 2 ;;
esac
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	tools := ExecTools{Path: script}
	ctx := context.Background()
	p, err := tools.Probe(ctx, "test:///default")
	if err != nil || p.LibvirtVersion != "10.0.0" || p.QEMUVersion != "8.2.0" {
		t.Fatalf("probe %+v, %v", p, err)
	}
	doms, err := tools.ListDomains(ctx, "test:///default")
	if err != nil || len(doms) != 1 || doms[0].VMIName != "a" || doms[0].VMIUID != "x" {
		t.Fatalf("list-domains %+v, %v", doms, err)
	}
	if _, err := (ExecTools{Path: filepath.Join(dir, "missing")}).Probe(ctx, "x"); err == nil {
		t.Fatal("missing binary: no error")
	}
}

// prepare with the real qemu-img: an overlay over the base, kept across
// passes, and kernel paths resolved in the image directory.
func TestPrepareWithQemuImg(t *testing.T) {
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	imageDir, nodeDir := t.TempDir(), t.TempDir()
	base := filepath.Join(imageDir, "os", "base.img")
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-img", "create", "-f", "raw", base, "1M").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	a := &Agent{opts: Options{ImageDir: imageDir, NodeDataDir: nodeDir, Images: QemuImg{}}}
	a.host.KVMUsable = true
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: "u1", Namespace: "default", Name: "vm"},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{
				Devices: &apiv1.Devices{Disks: []*apiv1.Disk{
					{Name: "root", Disk: &apiv1.DiskTarget{Bus: "virtio"}, BootOrder: 1},
					{Name: "iso", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}},
				}},
				Firmware: &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "k/vmlinuz", Initrd: "k/initrd", Cmdline: "console=ttyS0"}},
			},
			Volumes: []*apiv1.Volume{
				{Name: "root", Image: &apiv1.ImageVolume{Name: "os/base.img"}},
				{Name: "iso", Image: &apiv1.ImageVolume{Name: "os/base.img"}},
			},
		},
	}
	rec := &state.VMI{UID: "u1", Namespace: "default", Name: "vm", DomainName: "default_vm", Dir: filepath.Join(nodeDir, "vmis", "u1")}
	opts, err := a.prepare(ctx, vmi, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Kvm || opts.DomainName != "default_vm" || opts.ConsoleLogPath != filepath.Join(rec.Dir, "console.log") {
		t.Errorf("options %+v", opts)
	}
	if opts.KernelPath != filepath.Join(imageDir, "k/vmlinuz") || opts.InitrdPath != filepath.Join(imageDir, "k/initrd") || opts.KernelCmdline != "console=ttyS0" {
		t.Errorf("kernel boot %q %q %q", opts.KernelPath, opts.InitrdPath, opts.KernelCmdline)
	}
	if len(opts.Disks) != 2 {
		t.Fatalf("disks %v", opts.Disks)
	}
	root, iso := opts.Disks[0], opts.Disks[1]
	if root.Format != "qcow2" || root.Device != "disk" || root.Bus != "virtio" || root.BootOrder != 1 || !strings.HasPrefix(root.Path, rec.Dir) {
		t.Errorf("root disk %v", root)
	}
	if iso.Path != base || iso.Format != "raw" || iso.Device != "cdrom" || !iso.ReadOnly {
		t.Errorf("cdrom %v", iso)
	}
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", root.Path).Output()
	if err != nil {
		t.Fatal(err)
	}
	var info struct {
		Format        string `json:"format"`
		BackingFile   string `json:"backing-filename"`
		BackingFormat string `json:"backing-filename-format"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "qcow2" || info.BackingFile != base || info.BackingFormat != "raw" {
		t.Errorf("overlay %+v", info)
	}

	// The overlay holds the guest's writes: a second pass keeps it.
	if err := os.WriteFile(root.Path+".marker", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st1, _ := os.Stat(root.Path)
	if _, err := a.prepare(ctx, vmi, rec); err != nil {
		t.Fatal(err)
	}
	st2, _ := os.Stat(root.Path)
	if !st1.ModTime().Equal(st2.ModTime()) {
		t.Error("overlay recreated")
	}

	// A base image that is not there fails the preparation for good.
	vmi.Spec.Volumes[0].Image.Name = "os/missing.img"
	rec2 := &state.VMI{UID: "u2", Dir: filepath.Join(nodeDir, "vmis", "u2"), DomainName: "default_vm2"}
	_, err = a.prepare(ctx, vmi, rec2)
	var pe *prepareError
	if !errors.As(err, &pe) || pe.reason != ReasonPrepareFailed {
		t.Fatalf("missing base: %v", err)
	}
	// Paths escaping the image directory are refused.
	vmi.Spec.Volumes[0].Image.Name = "../etc/passwd"
	if _, err := a.prepare(ctx, vmi, rec2); !errors.As(err, &pe) {
		t.Fatalf("escaping path: %v", err)
	}
}

func TestNewValidatesOptions(t *testing.T) {
	h := newHarness(t)
	for name, mod := range map[string]func(*Options){
		"no node name":       func(o *Options) { o.NodeName = "" },
		"no API":             func(o *Options) { o.API = nil },
		"no launchers":       func(o *Options) { o.Launchers = nil },
		"no data dir":        func(o *Options) { o.NodeDataDir = "" },
		"relative image dir": func(o *Options) { o.ImageDir = "images" },
	} {
		o := h.options(true)
		mod(&o)
		if _, err := New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Without a State the bolt database is opened in the node data dir.
	o := h.options(true)
	o.State = nil
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if _, err := os.Stat(filepath.Join(h.nodeDir, "state.db")); err != nil {
		t.Fatal(err)
	}
}
