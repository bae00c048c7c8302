// Package domxml turns a VMI and the node agent's decisions into a libvirt
// domain definition. It is pure: no libvirt connection, no file access, so
// golden-file tests pin the XML exactly.
package domxml

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

const (
	// DefaultTBCacheMiB is the TCG translation-block cache when the node
	// agent does not pick one. QEMU's own default is 1 GiB, which a small
	// guest would mostly leave untouched but which inflates RSS under
	// memory pressure; 32 MiB keeps TCG guests usable.
	DefaultTBCacheMiB = 32
)

// Build returns the domain for vmi. opts carries what only the node knows:
// the domain name, KVM availability, resolved disk and kernel paths and the
// console log file.
func Build(vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (*libvirtxml.Domain, error) {
	if vmi == nil || vmi.GetMetadata() == nil {
		return nil, errors.New("vmi and its metadata are required")
	}
	if opts == nil || opts.GetDomainName() == "" {
		return nil, errors.New("sync options with a domain name are required")
	}
	spec := vmi.GetSpec().GetDomain()

	memKiB, err := memoryKiB(spec.GetMemory().GetGuest())
	if err != nil {
		return nil, err
	}
	meta, err := metadataFor(vmi, opts)
	if err != nil {
		return nil, err
	}
	devices, err := buildDevices(vmi, opts)
	if err != nil {
		return nil, err
	}
	osDef, err := buildOS(vmi.GetSpec(), opts)
	if err != nil {
		return nil, err
	}
	sockets, cores, threads := topology(spec.GetCpu())

	dom := &libvirtxml.Domain{
		Type:     "qemu",
		Name:     opts.GetDomainName(),
		Metadata: &libvirtxml.DomainMetadata{XML: meta},
		Memory:   &libvirtxml.DomainMemory{Value: memKiB, Unit: "KiB"},
		VCPU:     &libvirtxml.DomainVCPU{Placement: "static", Value: sockets * cores * threads},
		OS:       osDef,
		Features: &libvirtxml.DomainFeatureList{
			ACPI: &libvirtxml.DomainFeature{},
			APIC: &libvirtxml.DomainFeatureAPIC{},
		},
		CPU: &libvirtxml.DomainCPU{
			Topology: &libvirtxml.DomainCPUTopology{Sockets: int(sockets), Cores: int(cores), Threads: int(threads)},
		},
		Clock:      &libvirtxml.DomainClock{Offset: "utc"},
		OnPoweroff: "destroy",
		OnReboot:   "restart",
		// destroy, not restart: a crashed guest ends the instance (Failed)
		// and the VM's run strategy decides what happens next.
		OnCrash: "destroy",
		Devices: devices,
	}
	if needsSMM(vmi.GetSpec()) {
		dom.Features.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
	}
	if opts.GetKvm() {
		dom.Type = "kvm"
		dom.CPU.Mode = "host-passthrough"
	} else {
		tb := opts.GetTbCacheMib()
		if tb <= 0 {
			tb = DefaultTBCacheMiB
		}
		dom.Features.TCG = &libvirtxml.DomainFeatureTCG{
			TBCache: &libvirtxml.DomainFeatureTCGTBCache{Unit: "MiB", Size: uint(tb)},
		}
		// "maximum" gives TCG guests every feature QEMU can emulate, so
		// distributions that need x86-64-v2 boot; qemu64 would not.
		dom.CPU.Mode = "maximum"
	}
	return dom, nil
}

// memoryKiB converts the guest memory quantity to KiB, rounding up.
func memoryKiB(guest string) (uint, error) {
	if guest == "" {
		return 0, errors.New("spec.domain.memory.guest is required")
	}
	q, err := resource.ParseQuantity(guest)
	if err != nil {
		return 0, fmt.Errorf("spec.domain.memory.guest %q: %w", guest, err)
	}
	b := q.Value()
	if b <= 0 {
		return 0, fmt.Errorf("spec.domain.memory.guest %q must be positive", guest)
	}
	return uint((b + 1023) / 1024), nil
}

func topology(cpu *apiv1.CPU) (sockets, cores, threads uint) {
	one := func(v int32) uint {
		if v < 1 {
			return 1
		}
		return uint(v)
	}
	return one(cpu.GetSockets()), one(cpu.GetCores()), one(cpu.GetThreads())
}

func metadataFor(vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (string, error) {
	md := vmi.GetMetadata()
	if md.GetUid() == "" {
		return "", errors.New("vmi metadata.uid is required")
	}
	var shared []string
	for _, d := range opts.GetDisks() {
		if d.GetShared() {
			shared = append(shared, d.GetName())
		}
	}
	return Metadata{
		SharedDisks:        shared,
		UID:                md.GetUid(),
		Namespace:          md.GetNamespace(),
		Name:               md.GetName(),
		GracePeriodSeconds: vmi.GetSpec().GracePeriodSeconds(),
		NodeFailurePolicy:  opts.GetNodeFailurePolicy(),
		Node:               vmi.GetStatus().GetNodeName(),
	}.MarshalNamespaced()
}
