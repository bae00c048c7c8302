package domxml

import (
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func testVMI(memory string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f"},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{
				Cpu:    &apiv1.CPU{Cores: 2},
				Memory: &apiv1.Memory{Guest: memory},
			},
		},
	}
}

func TestBuildGolden(t *testing.T) {
	grace := int64(5)
	tests := []struct {
		name string
		vmi  func() *apiv1.VirtualMachineInstance
		opts *launcherpb.SyncOptions
	}{
		{
			name: "tcg_kernel_boot",
			vmi:  func() *apiv1.VirtualMachineInstance { return testVMI("128Mi") },
			opts: &launcherpb.SyncOptions{
				DomainName:     "default_web",
				TbCacheMib:     16,
				ConsoleLogPath: "/var/log/virtplane/console/default_web.log",
				KernelPath:     "/var/lib/virtplane/images/vmlinuz",
				InitrdPath:     "/var/lib/virtplane/images/initrd.img",
				KernelCmdline:  "console=ttyS0 panic=-1",
			},
		},
		{
			name: "storage_classes",
			vmi:  func() *apiv1.VirtualMachineInstance { return testVMI("256Mi") },
			opts: &launcherpb.SyncOptions{
				DomainName:     "default_db",
				ConsoleLogPath: "/var/log/virtplane/console/default_db.log",
				Disks: []*launcherpb.DiskSource{
					{Name: "root", Format: "raw", BootOrder: 1, Rbd: &launcherpb.RBDDisk{
						Monitors: []string{"169.254.7.254:3300", "[fd00::1]:6789"}, Pool: "vp",
						Image: "vm-6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f-vol-root", User: "virtplane", SecretUsage: "virtplane-ceph",
						ConfigFile: "/var/lib/virtplane/node/ceph/virtplane-ceph.conf"}},
					{Name: "data", Path: "/mnt/nfs/virtplane/vms/6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f/volumes/data.qcow2", Format: "qcow2", Shared: true},
				},
				CephSecrets: []*launcherpb.CephSecret{{Usage: "virtplane-ceph", Key: "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="}},
			},
		},
		{
			// An EFI guest whose volume and NVRAM are on an rbd class.
			name: "tcg_efi_rbd_nvram",
			vmi: func() *apiv1.VirtualMachineInstance {
				v := testVMI("384Mi")
				v.Spec.Domain.Firmware = &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}
				return v
			},
			opts: &launcherpb.SyncOptions{
				DomainName: "default_db",
				Disks: []*launcherpb.DiskSource{
					{Name: "root", Format: "raw", Rbd: rbdImage("vm-6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f-vol-root")},
				},
				NvramRbd:    rbdImage("vm-6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f-nvram"),
				CephSecrets: []*launcherpb.CephSecret{{Usage: "virtplane-ceph", Key: "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="}},
			},
		},
		{
			name: "kvm_disks",
			vmi: func() *apiv1.VirtualMachineInstance {
				v := testVMI("1Gi")
				v.Spec.Domain.Cpu = &apiv1.CPU{Sockets: 2, Cores: 2, Threads: 2}
				v.Spec.TerminationGracePeriodSeconds = &grace
				v.Status = &apiv1.VirtualMachineInstanceStatus{NodeName: "host-1"}
				return v
			},
			opts: &launcherpb.SyncOptions{
				DomainName:        "prod_db",
				Kvm:               true,
				NodeFailurePolicy: "RestartElsewhere",
				ConsoleLogPath:    "/var/log/virtplane/console/prod_db.log",
				Disks: []*launcherpb.DiskSource{
					{Name: "root", Path: "/var/lib/virtplane/disks/root.qcow2", Format: "qcow2", BootOrder: 1, Serial: "root0"},
					{Name: "data", Path: "/var/lib/virtplane/disks/data.raw", Format: "raw", Bus: "virtio", ReadOnly: true},
					{Name: "cloudinit", Path: "/var/lib/virtplane/disks/cidata.iso", Format: "raw", Device: "cdrom", Bus: "sata"},
					{Name: "logs", Path: "/var/lib/virtplane/disks/logs.qcow2", Format: "qcow2", Bus: "scsi"},
				},
			},
		},
		{
			name: "two_nics_mac",
			vmi: func() *apiv1.VirtualMachineInstance {
				v := testVMI("512M")
				v.Spec.Networks = []*apiv1.Network{
					{Name: "default", User: &apiv1.UserNetwork{}},
					{Name: "backend", User: &apiv1.UserNetwork{}},
				}
				v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{
					{Name: "default", MacAddress: "52:54:00:AB:CD:01"},
					{Name: "backend", Model: "e1000", MacAddress: "52:54:00:ab:cd:02"},
				}}
				return v
			},
			opts: &launcherpb.SyncOptions{DomainName: "default_web"},
		},
		{
			// One interface of each kind: taps named for the instance,
			// no <vlan> (libvirt 9.0 has none for Linux bridges; the
			// launcher sets it on the tap).
			name: "network_kinds",
			vmi: func() *apiv1.VirtualMachineInstance {
				v := testVMI("256Mi")
				v.Spec.Networks = []*apiv1.Network{
					{Name: "default", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{{HostPort: 18080, GuestPort: 80}}}},
					{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: "br0", Vlan: 10}},
					{Name: "nat", Network: &apiv1.LibvirtNetwork{Name: "isolated"}},
				}
				v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{
					{Name: "default", MacAddress: "02:00:00:00:00:01"},
					{Name: "lan", Model: "e1000", MacAddress: "02:00:00:00:00:02"},
					{Name: "nat", Model: "rtl8139", MacAddress: "02:00:00:00:00:03"},
				}}
				return v
			},
			opts: &launcherpb.SyncOptions{DomainName: "default_web"},
		},
		{
			// No boot order anywhere: the first disk boots.
			name: "tcg_bios_disk",
			vmi: func() *apiv1.VirtualMachineInstance {
				v := testVMI("256Mi")
				v.Spec.Domain.Firmware = &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}}
				return v
			},
			opts: &launcherpb.SyncOptions{
				DomainName: "default_web",
				Disks: []*launcherpb.DiskSource{
					{Name: "root", Path: "/var/lib/virtplane/vmis/u/disks/root.qcow2", Format: "qcow2"},
					{Name: "cloudinit", Path: "/var/lib/virtplane/vmis/u/disks/cloudinit.iso", Format: "raw", Device: "cdrom"},
				},
			},
		},
		{
			name: "tcg_efi_disk",
			vmi: func() *apiv1.VirtualMachineInstance {
				v := testVMI("384Mi")
				v.Spec.Domain.Firmware = &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}
				return v
			},
			opts: &launcherpb.SyncOptions{
				DomainName: "default_web",
				NvramPath:  "/var/lib/virtplane/vms/6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f/nvram.fd",
				Disks: []*launcherpb.DiskSource{
					{Name: "cloudinit", Path: "/var/lib/virtplane/vmis/u/disks/cloudinit.iso", Format: "raw", Device: "cdrom"},
					{Name: "root", Path: "/var/lib/virtplane/vmis/u/disks/root.qcow2", Format: "qcow2", BootOrder: 2},
				},
			},
		},
		{
			name: "kvm_efi_secure_boot",
			vmi: func() *apiv1.VirtualMachineInstance {
				v := testVMI("1Gi")
				v.Spec.Domain.Firmware = &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{SecureBoot: true}}}
				return v
			},
			opts: &launcherpb.SyncOptions{
				DomainName: "default_web",
				Kvm:        true,
				NvramPath:  "/var/lib/virtplane/vms/6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f/nvram.fd",
				Disks: []*launcherpb.DiskSource{
					{Name: "root", Path: "/var/lib/virtplane/vmis/u/disks/root.qcow2", Format: "qcow2"},
				},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dom, err := Build(tt.vmi(), tt.opts)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			got, err := dom.Marshal()
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			got += "\n"
			path := filepath.Join("testdata", tt.name+".xml")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if got != string(want) {
				t.Errorf("domain XML differs from %s (go test -update rewrites it)\n--- got\n%s\n--- want\n%s", path, got, want)
			}
			// The result must parse back and keep its metadata readable.
			var back libvirtxml.Domain
			if err := back.Unmarshal(got); err != nil {
				t.Fatalf("unmarshal own output: %v", err)
			}
			md, err := ParseMetadata(back.Metadata.XML)
			if err != nil {
				t.Fatal(err)
			}
			if md.UID != "6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f" || md.Namespace != "default" || md.Name != "web" {
				t.Errorf("metadata = %+v", md)
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(*apiv1.VirtualMachineInstance, *launcherpb.SyncOptions)
		want   string
	}{
		{"missing memory", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) { v.Spec.Domain.Memory = nil }, "spec.domain.memory.guest is required"},
		{"bad memory", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) { v.Spec.Domain.Memory.Guest = "lots" }, `spec.domain.memory.guest "lots"`},
		{"zero memory", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) { v.Spec.Domain.Memory.Guest = "0" }, "must be positive"},
		{"no domain name", func(_ *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) { o.DomainName = "" }, "domain name"},
		{"no uid", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) { v.Metadata.Uid = "" }, "metadata.uid"},
		{"initrd without kernel", func(_ *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) { o.InitrdPath = "/x" }, "without a kernel"},
		{"virtio cdrom", func(_ *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) {
			o.Disks = []*launcherpb.DiskSource{{Name: "c", Path: "/c.iso", Device: "cdrom", Bus: "virtio"}}
		}, "cannot use the virtio bus"},
		{"relative disk", func(_ *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) {
			o.Disks = []*launcherpb.DiskSource{{Name: "d", Path: "d.img"}}
		}, "not absolute"},
		{"unknown network", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) {
			v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "nope"}}}
		}, `interface "nope": no network`},
		{"network without kind", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) {
			v.Spec.Networks = []*apiv1.Network{{Name: "n"}}
			v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "n"}}}
		}, "has no kind"},
		{"bridge without name", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) {
			v.Spec.Networks = []*apiv1.Network{{Name: "n", Bridge: &apiv1.BridgeNetwork{}}}
			v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "n"}}}
		}, "names no bridge"},
		{"libvirt network without name", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) {
			v.Spec.Networks = []*apiv1.Network{{Name: "n", Network: &apiv1.LibvirtNetwork{}}}
			v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "n"}}}
		}, "names no libvirt network"},
		{"bad model", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) {
			v.Spec.Networks = []*apiv1.Network{{Name: "n", User: &apiv1.UserNetwork{}}}
			v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "n", Model: "ne2k"}}}
		}, "unknown model"},
		{"bad mac", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) {
			v.Spec.Networks = []*apiv1.Network{{Name: "n", User: &apiv1.UserNetwork{}}}
			v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "n", MacAddress: "zz"}}}
		}, "invalid MAC"},
		{"efi without nvram", func(v *apiv1.VirtualMachineInstance, _ *launcherpb.SyncOptions) { v.Spec.Domain.Firmware = efi() }, "needs an NVRAM path"},
		{"relative nvram", func(v *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) {
			v.Spec.Domain.Firmware, o.NvramPath = efi(), "vms/x/nvram.fd"
		}, "not absolute"},
		{"unclean nvram", func(v *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) {
			v.Spec.Domain.Firmware, o.NvramPath = efi(), "/var/lib/virtplane/vms/../../etc/x"
		}, "not absolute and clean"},
		{"nvram for bios", func(_ *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) { o.NvramPath = "/n.fd" }, "only for EFI"},
		{"rbd nvram for bios", func(_ *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) { o.NvramRbd = rbdImage("n") }, "only for EFI"},
		{"nvram file and rbd", func(v *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) {
			v.Spec.Domain.Firmware, o.NvramPath, o.NvramRbd = efi(), "/n.fd", rbdImage("n")
		}, "both given"},
		{"rbd nvram without a secret", func(v *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) {
			v.Spec.Domain.Firmware, o.NvramRbd = efi(), rbdImage("n")
			o.NvramRbd.SecretUsage = ""
		}, "NVRAM: an rbd image needs monitors, pool, image, user and secret"},
		{"nvram with kernel boot", func(_ *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) {
			o.KernelPath, o.NvramPath = "/k", "/n.fd"
		}, "kernel boot cannot use EFI"},
		{"efi with kernel boot", func(v *apiv1.VirtualMachineInstance, o *launcherpb.SyncOptions) {
			v.Spec.Domain.Firmware, o.KernelPath = efi(), "/k"
		}, "kernel boot cannot use EFI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := testVMI("64Mi")
			o := &launcherpb.SyncOptions{DomainName: "d"}
			tt.mutate(v, o)
			_, err := Build(v, o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Build error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func rbdImage(image string) *launcherpb.RBDDisk {
	return &launcherpb.RBDDisk{Monitors: []string{"169.254.7.254:3300"}, Pool: "vp", Image: image, User: "virtplane", SecretUsage: "virtplane-ceph"}
}

func efi() *apiv1.Firmware {
	return &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}}
}

func TestDiskSuffix(t *testing.T) {
	for i, want := range map[int]string{0: "a", 1: "b", 25: "z", 26: "aa", 27: "ab", 701: "zz", 702: "aaa"} {
		if got := diskSuffix(i); got != want {
			t.Errorf("diskSuffix(%d) = %q, want %q", i, got, want)
		}
	}
}

func TestMemoryRoundsUp(t *testing.T) {
	for in, want := range map[string]uint{"128Mi": 131072, "1Gi": 1048576, "512M": 500000, "1000": 1} {
		got, err := memoryKiB(in)
		if err != nil || got != want {
			t.Errorf("memoryKiB(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

func TestMetadataRoundTrip(t *testing.T) {
	m := Metadata{UID: "u", Namespace: "ns", Name: "n", GracePeriodSeconds: 30, PausedByUser: true, ShutdownRequestedAt: 17,
		SharedDisks: []string{"data", "logs"}}
	for _, marshal := range []func() (string, error){m.MarshalNamespaced, m.MarshalElement} {
		s, err := marshal()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseMetadata(s)
		if err != nil {
			t.Fatal(err)
		}
		got.XMLName = m.XMLName
		if !reflect.DeepEqual(got, m) {
			t.Errorf("round trip of %s = %+v", s, got)
		}
	}
	ns, _ := m.MarshalNamespaced()
	if !strings.HasPrefix(ns, `<vmi xmlns="`+Namespace+`">`) {
		t.Errorf("namespaced form = %s", ns)
	}
	el, _ := m.MarshalElement()
	if !strings.HasPrefix(el, `<vmi><uid>`) {
		t.Errorf("element form = %s", el)
	}
	if _, err := ParseMetadata(`<other/>`); err == nil {
		t.Error("ParseMetadata accepted <other/>")
	}
	// libvirt returns stored metadata with the prefix it was set under.
	got, err := ParseMetadata(`<virtplane:vmi xmlns:virtplane="` + Namespace + `"><virtplane:uid>x</virtplane:uid></virtplane:vmi>`)
	if err != nil || got.UID != "x" {
		t.Errorf("prefixed parse = %+v, %v", got, err)
	}
}
