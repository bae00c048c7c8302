package testguest

import "libvirt.org/go/libvirtxml"

// Domain is the test guest as a transient libvirt domain, for tests that
// boot it without virtplane: TCG (the hosts that run the tests have no
// KVM), direct kernel boot from the guest in dir with cmdline, the serial
// console logged to the file console, pvpanic, no USB controller or
// balloon (less to probe while booting), disks as given, and destroy on
// every kind of stop, so that the shut-off reason tells what happened (a
// reboot would be an unnoticed panic=-1).
func Domain(name, dir, console, cmdline string, disks ...libvirtxml.DomainDisk) *libvirtxml.Domain {
	port := uint(0)
	src := &libvirtxml.DomainChardevSource{File: &libvirtxml.DomainChardevSourceFile{Path: console}}
	return &libvirtxml.Domain{
		Type:   "qemu",
		Name:   name,
		Memory: &libvirtxml.DomainMemory{Value: 160, Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: 1},
		OS: &libvirtxml.DomainOS{
			Type:    &libvirtxml.DomainOSType{Arch: "x86_64", Type: "hvm"},
			Kernel:  Kernel(dir),
			Initrd:  Initrd(dir),
			Cmdline: cmdline,
		},
		Features: &libvirtxml.DomainFeatureList{
			ACPI: &libvirtxml.DomainFeature{},
			APIC: &libvirtxml.DomainFeatureAPIC{},
			TCG:  &libvirtxml.DomainFeatureTCG{TBCache: &libvirtxml.DomainFeatureTCGTBCache{Unit: "MiB", Size: 32}},
		},
		OnPoweroff: "destroy",
		OnReboot:   "destroy",
		OnCrash:    "destroy",
		Devices: &libvirtxml.DomainDeviceList{
			Disks:       disks,
			Controllers: []libvirtxml.DomainController{{Type: "usb", Model: "none"}},
			Serials:     []libvirtxml.DomainSerial{{Source: src, Target: &libvirtxml.DomainSerialTarget{Port: &port}}},
			Consoles:    []libvirtxml.DomainConsole{{Source: src, Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &port}}},
			Panics:      []libvirtxml.DomainPanic{{Model: "isa"}},
			MemBalloon:  &libvirtxml.DomainMemBalloon{Model: "none"},
		},
	}
}
