package validation

import (
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestDefaultVirtualMachine(t *testing.T) {
	vm := &apiv1.VirtualMachine{
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: "Always",
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain: &apiv1.DomainSpec{
					Cpu:    &apiv1.CPU{Cores: 4},
					Memory: &apiv1.Memory{Guest: "1024Mi"},
					Devices: &apiv1.Devices{
						Disks: []*apiv1.Disk{
							{Name: "root"},
							{Name: "data", Disk: &apiv1.DiskTarget{ReadOnly: true}},
							{Name: "iso", Cdrom: &apiv1.CDRomTarget{}},
							{Name: "both", Disk: &apiv1.DiskTarget{}, Cdrom: &apiv1.CDRomTarget{}},
						},
						Interfaces: []*apiv1.Interface{{Name: "default"}, {Name: "fast", Model: "e1000"}},
					},
				},
				Volumes: []*apiv1.Volume{
					{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
					{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "10240Mi"}},
				},
			}},
		},
	}
	DefaultVirtualMachine(vm)

	want := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default"},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy:       "Always",
			NodeFailurePolicy: "Wait",
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{},
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{
						Cpu:    &apiv1.CPU{Cores: 4, Sockets: 1, Threads: 1},
						Memory: &apiv1.Memory{Guest: "1Gi"},
						Devices: &apiv1.Devices{
							Disks: []*apiv1.Disk{
								{Name: "root", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
								{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio", ReadOnly: true}},
								{Name: "iso", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}},
								// Invalid; left for validation to report.
								{Name: "both", Disk: &apiv1.DiskTarget{}, Cdrom: &apiv1.CDRomTarget{}},
							},
							Interfaces: []*apiv1.Interface{{Name: "default", Model: "virtio"}, {Name: "fast", Model: "e1000"}},
						},
					},
					Volumes: []*apiv1.Volume{
						{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
						{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "10Gi"}},
					},
					// No eviction strategy: unset means the cluster's default.
					TerminationGracePeriodSeconds: ptr(int64(30)),
				},
			},
		},
	}
	if !proto.Equal(vm, want) {
		t.Errorf("defaulted VM differs:\n got  %v\n want %v", vm, want)
	}
}

func TestDefaultKeepsExplicitValues(t *testing.T) {
	vm := validVM()
	tspecOf(vm).TerminationGracePeriodSeconds = ptr(int64(0))
	tspecOf(vm).Domain.Cpu = &apiv1.CPU{Cores: -1, Sockets: 2, Threads: 2}
	want := clone(vm)
	DefaultVirtualMachine(vm)
	if !proto.Equal(vm, want) {
		t.Errorf("defaulting changed explicit values:\n got  %v\n want %v", vm, want)
	}
}

// Quantities that fail validation stay as typed, so errors quote them.
func TestDefaultQuantities(t *testing.T) {
	cases := []struct{ memory, wantMemory, size, wantSize string }{
		{"1024Mi", "1Gi", "10240Mi", "10Gi"},
		{"1.5Gi", "1536Mi", "0.5Gi", "512Mi"},
		{"+2Gi", "2Gi", "01Gi", "1Gi"},
		{"2G", "2G", "1e9", "1e9"},
		{"1GB", "1GB", "10 Gi", "10 Gi"},
		{"16384Ki", "16Mi", "1073741824", "1073741824"},
		{"8192Ki", "8192Ki", "-1024Mi", "-1024Mi"}, // too small / negative
		{"2048Gi", "2048Gi", "2048Pi", "2048Pi"},   // too large
		{"16777216.5", "16777216.5", "1500m", "1500m"},
		{"", "", "", ""},
	}
	for _, tc := range cases {
		vm := validVM()
		tspecOf(vm).Domain.Memory.Guest = tc.memory
		tspecOf(vm).Volumes[1].Persistent.Size = tc.size
		DefaultVirtualMachine(vm)
		if got := tspecOf(vm).Domain.Memory.Guest; got != tc.wantMemory {
			t.Errorf("memory %q defaulted to %q, want %q", tc.memory, got, tc.wantMemory)
		}
		if got := tspecOf(vm).Volumes[1].Persistent.Size; got != tc.wantSize {
			t.Errorf("size %q defaulted to %q, want %q", tc.size, got, tc.wantSize)
		}
	}
}

func TestDefaultIdempotent(t *testing.T) {
	inputs := []*apiv1.VirtualMachine{
		nil,
		{},
		{Spec: &apiv1.VirtualMachineSpec{}},
		{Spec: &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{}}},
		validVM(),
	}
	odd := validVM()
	tspecOf(odd).Domain.Memory.Guest = "1.5Gi"
	tspecOf(odd).Volumes[1].Persistent.Size = "0.25Ti"
	devicesOf(odd).Disks[0].Disk = nil
	devicesOf(odd).Disks[1].Disk.Bus = ""
	devicesOf(odd).Disks = append(devicesOf(odd).Disks, nil)
	devicesOf(odd).Interfaces = append(devicesOf(odd).Interfaces, nil)
	tspecOf(odd).Volumes = append(tspecOf(odd).Volumes, nil)
	tspecOf(odd).Networks = append(tspecOf(odd).Networks, nil)
	inputs = append(inputs, odd)

	for i, vm := range inputs {
		DefaultVirtualMachine(vm)
		once := proto.Clone(vm)
		DefaultVirtualMachine(vm)
		if !proto.Equal(vm, once) {
			t.Errorf("input %d: defaulting twice differs from once:\n%v\n%v", i, once, vm)
		}
		if vm == nil {
			continue
		}
		// Everything later code walks exists.
		d := vm.Spec.Template.Spec.Domain
		_ = vm.Metadata.Namespace + vm.Spec.Template.Metadata.Name + d.Memory.Guest
		_ = d.Cpu.Cores
		_ = len(d.Devices.Disks)
	}
}

func TestDefaultVirtualMachineInstance(t *testing.T) {
	DefaultVirtualMachineInstance(nil)
	vmi := &apiv1.VirtualMachineInstance{}
	DefaultVirtualMachineInstance(vmi)
	want := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default"},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{
				Cpu: &apiv1.CPU{Cores: 1, Sockets: 1, Threads: 1}, Memory: &apiv1.Memory{}, Devices: &apiv1.Devices{},
			},
			TerminationGracePeriodSeconds: ptr(int64(30)),
		},
	}
	if !proto.Equal(vmi, want) {
		t.Errorf("got %v\nwant %v", vmi, want)
	}

	vmi = &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "prod"}, Spec: tspecOf(validVM())}
	vmi.Spec.Domain.Memory.Guest = "2048Mi"
	DefaultVirtualMachineInstance(vmi)
	if vmi.Metadata.Namespace != "prod" || vmi.Spec.Domain.Memory.Guest != "2Gi" {
		t.Errorf("got namespace %q memory %q", vmi.Metadata.Namespace, vmi.Spec.Domain.Memory.Guest)
	}
}
