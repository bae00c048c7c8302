package testguest

import (
	"path/filepath"

	"libvirt.org/go/libvirtxml"
)

// AdoptableDomain is the test guest as a domain a user defined outside
// virtplane, for tests of adoption (docs/adopt.md): TCG, 160 MiB, direct
// kernel boot of kernel and InitrdFile from the node image directory
// imageDir, its boot counter on the raw disk file disk (vda, Persist), a
// user network NIC, and a serial console on a pty that virtlogd also
// logs into bootLog (so that a test reads the boot before virtplane
// has the domain).
func AdoptableDomain(name, imageDir, kernel, disk, bootLog string) *libvirtxml.Domain {
	port := uint(0)
	pty := &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}}
	return &libvirtxml.Domain{
		Type:   "qemu",
		Name:   name,
		Memory: &libvirtxml.DomainMemory{Value: 160, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS: &libvirtxml.DomainOS{
			Type:    &libvirtxml.DomainOSType{Arch: "x86_64", Type: "hvm"},
			Kernel:  filepath.Join(imageDir, kernel),
			Initrd:  filepath.Join(imageDir, InitrdFile),
			Cmdline: Cmdline(Persist("/dev/vda"), Hostname(name)),
		},
		Features: &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		Devices: &libvirtxml.DomainDeviceList{
			Disks: []libvirtxml.DomainDisk{{
				Device: "disk",
				Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
				Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
				Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
			}},
			Interfaces: []libvirtxml.DomainInterface{{
				Source: &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}},
				Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			}},
			Serials: []libvirtxml.DomainSerial{{Source: pty, Target: &libvirtxml.DomainSerialTarget{Port: &port},
				Log: &libvirtxml.DomainChardevLog{File: bootLog, Append: "on"}}},
			Consoles:   []libvirtxml.DomainConsole{{Source: pty, Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port}}},
			MemBalloon: &libvirtxml.DomainMemBalloon{Model: "none"},
		},
	}
}
