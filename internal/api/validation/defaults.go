package validation

import (
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// DefaultVirtualMachine fills in defaults and canonicalises quantities, in
// place. It creates the messages later code walks (metadata, spec,
// template, its metadata and spec, domain, cpu, memory, devices) so callers
// need no nil checks; nil list elements become empty messages, which
// validation then reports. Values it cannot interpret are left alone so that
// validation errors quote the user's input. Applying it twice is the same as
// once.
func DefaultVirtualMachine(vm *apiv1.VirtualMachine) {
	if vm == nil {
		return
	}
	DiscardUnknown(vm)
	vm.Metadata = defaultMetadata(vm.Metadata)
	vm.Spec = defaultVMSpec(vm.Spec)
}

// defaultVMSpec is DefaultVirtualMachine's work on a VM spec (a VM's, or
// the VM template of a pool), made if nil.
func defaultVMSpec(spec *apiv1.VirtualMachineSpec) *apiv1.VirtualMachineSpec {
	if spec == nil {
		spec = &apiv1.VirtualMachineSpec{}
	}
	if spec.NodeFailurePolicy == "" {
		spec.NodeFailurePolicy = apiv1.DefaultNodeFailurePolicy
	}
	spec.Template = defaultInstanceTemplate(spec.Template)
	return spec
}

// defaultInstanceTemplate defaults an instance template (a VM's, or a
// replica set's), made if nil.
func defaultInstanceTemplate(t *apiv1.VirtualMachineInstanceTemplateSpec) *apiv1.VirtualMachineInstanceTemplateSpec {
	if t == nil {
		t = &apiv1.VirtualMachineInstanceTemplateSpec{}
	}
	t.Metadata = templateMetadata(t.Metadata)
	if t.Spec == nil {
		t.Spec = &apiv1.VirtualMachineInstanceSpec{}
	}
	defaultVMISpec(t.Spec)
	return t
}

// templateMetadata is what a template's metadata keeps. Only the labels
// and annotations go onto what is made from it (as in KubeVirt, the rest
// is ignored); the rest is dropped rather than stored, since nothing
// validates what nothing reads, and a name or finalizer list there would
// be unbounded.
func templateMetadata(m *apiv1.ObjectMeta) *apiv1.ObjectMeta {
	if m == nil {
		return &apiv1.ObjectMeta{}
	}
	return &apiv1.ObjectMeta{Labels: m.Labels, Annotations: m.Annotations}
}

// DefaultVirtualMachineInstance is DefaultVirtualMachine for an instance.
func DefaultVirtualMachineInstance(vmi *apiv1.VirtualMachineInstance) {
	if vmi == nil {
		return
	}
	DiscardUnknown(vmi)
	vmi.Metadata = defaultMetadata(vmi.Metadata)
	if vmi.Spec == nil {
		vmi.Spec = &apiv1.VirtualMachineInstanceSpec{}
	}
	defaultVMISpec(vmi.Spec)
}

// defaultMetadata is m, made if nil, in the default namespace unless it
// names one.
func defaultMetadata(m *apiv1.ObjectMeta) *apiv1.ObjectMeta {
	if m == nil {
		m = &apiv1.ObjectMeta{}
	}
	if m.Namespace == "" {
		m.Namespace = apiv1.DefaultNamespace
	}
	return m
}

func defaultVMISpec(spec *apiv1.VirtualMachineInstanceSpec) {
	if spec.Domain == nil {
		spec.Domain = &apiv1.DomainSpec{}
	}
	d := spec.Domain
	if d.Cpu == nil {
		d.Cpu = &apiv1.CPU{}
	}
	// Only 0 (unset) becomes 1; negative counts stay for validation to report.
	for _, n := range []*int32{&d.Cpu.Cores, &d.Cpu.Sockets, &d.Cpu.Threads} {
		if *n == 0 {
			*n = 1
		}
	}
	if d.Memory == nil {
		d.Memory = &apiv1.Memory{}
	}
	if validateGuestMemory(d.Memory.Guest, nil) == nil {
		d.Memory.Guest = mustCanonical(d.Memory.Guest)
	}
	if d.Devices == nil {
		d.Devices = &apiv1.Devices{}
	}
	for i, disk := range d.Devices.Disks {
		if disk == nil {
			disk = &apiv1.Disk{}
			d.Devices.Disks[i] = disk
		}
		switch {
		case disk.Disk == nil && disk.Cdrom == nil:
			disk.Disk = &apiv1.DiskTarget{Bus: apiv1.DefaultDiskBus}
		case disk.Disk != nil && disk.Cdrom != nil:
			// Invalid either way; leave it for validation to report.
		case disk.Disk != nil && disk.Disk.Bus == "":
			disk.Disk.Bus = apiv1.DefaultDiskBus
		case disk.Cdrom != nil && disk.Cdrom.Bus == "":
			disk.Cdrom.Bus = apiv1.DefaultCDRomBus
		}
	}
	for i, iface := range d.Devices.Interfaces {
		if iface == nil {
			iface = &apiv1.Interface{}
			d.Devices.Interfaces[i] = iface
		}
		if iface.Model == "" {
			iface.Model = apiv1.DefaultInterfaceModel
		}
	}
	for i, v := range spec.Volumes {
		if v == nil {
			v = &apiv1.Volume{}
			spec.Volumes[i] = v
		}
		if pv := v.Persistent; pv != nil && validateDiskSize(pv.Size, nil) == nil {
			pv.Size = mustCanonical(pv.Size)
		}
	}
	for i, n := range spec.Networks {
		if n == nil {
			spec.Networks[i] = &apiv1.Network{}
		}
	}
	if spec.TerminationGracePeriodSeconds == nil {
		g := apiv1.DefaultTerminationGracePeriodSeconds
		spec.TerminationGracePeriodSeconds = &g
	}
}

// mustCanonical canonicalises a quantity already known to be valid.
func mustCanonical(s string) string {
	c, err := CanonicalQuantity(s)
	if err != nil {
		return s
	}
	return c
}

// DiscardUnknown drops the fields the server's schema does not have from m
// and every message in it. A client can send any field number; protobuf
// keeps what it does not know and would store it unvalidated and
// unbounded. Dropping them is what Kubernetes does with unknown fields.
func DiscardUnknown(m proto.Message) {
	if m == nil {
		return
	}
	discardUnknown(m.ProtoReflect())
}

func discardUnknown(m protoreflect.Message) {
	if !m.IsValid() {
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList():
			if fd.Message() != nil {
				l := v.List()
				for i := range l.Len() {
					discardUnknown(l.Get(i).Message())
				}
			}
		case fd.IsMap():
			if fd.MapValue().Message() != nil {
				v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
					discardUnknown(mv.Message())
					return true
				})
			}
		case fd.Message() != nil:
			discardUnknown(v.Message())
		}
		return true
	})
	if len(m.GetUnknown()) > 0 {
		m.SetUnknown(nil)
	}
}
