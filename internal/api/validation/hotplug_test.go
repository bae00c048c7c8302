package validation

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// hotVM is validVM with its "data" volume hotpluggable (a scsi disk, no
// boot order: valid as it is).
func hotVM() *apiv1.VirtualMachine {
	vm := validVM()
	tspecOf(vm).Volumes[1].Persistent.Hotpluggable = true
	return vm
}

func TestHotpluggableDiskRules(t *testing.T) {
	opts := Options{ImageDir: testImageDir}
	if errs := ValidateVirtualMachine(hotVM(), opts); len(errs) > 0 {
		t.Fatalf("hotVM() invalid: %v", errs)
	}
	cases := []struct {
		name   string
		mutate func(vm *apiv1.VirtualMachine)
		want   []want
	}{
		{"virtio bus", func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[1].Disk.Bus = "virtio" }, nil},
		{"default bus", func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[1].Disk = nil }, nil},
		{"sata bus", func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[1].Disk.Bus = "sata" },
			[]want{notSupported(disks + "[1].disk.bus")}},
		{"cdrom", func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Disks[1].Disk = nil
			devicesOf(vm).Disks[1].Cdrom = &apiv1.CDRomTarget{}
		}, []want{forbidden(disks + "[1].cdrom")}},
		{"boot order", func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[1].BootOrder = 2 },
			[]want{forbidden(disks + "[1].boot_order")}},
		{"first disk boots by default", func(vm *apiv1.VirtualMachine) {
			d := devicesOf(vm)
			d.Disks[0].BootOrder = 0
			d.Disks[0], d.Disks[1] = d.Disks[1], d.Disks[0]
		}, []want{forbidden(disks + "[0]")}},
		{"first disk, another boots by order", func(vm *apiv1.VirtualMachine) {
			d := devicesOf(vm)
			d.Disks[0], d.Disks[1] = d.Disks[1], d.Disks[0]
		}, nil},
		{"first disk, kernel boot", func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "vmlinux"}}
			d := devicesOf(vm)
			d.Disks[0].BootOrder = 0
			d.Disks[0], d.Disks[1] = d.Disks[1], d.Disks[0]
		}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := hotVM()
			tc.mutate(vm)
			expectErrors(t, ValidateVirtualMachine(vm, opts), tc.want...)
		})
	}
	// The message says why, for the user reading it.
	vm := hotVM()
	devicesOf(vm).Disks[1].Disk.Bus = "sata"
	errs := ValidateVirtualMachine(vm, opts)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "SATA cannot be plugged") {
		t.Errorf("sata: %v, want the reason in the message", errs)
	}
}

// liveSpec is a running instance's spec: a root image disk, a plain
// persistent disk and a hotpluggable one.
func liveSpec() *apiv1.VirtualMachineInstanceSpec {
	return &apiv1.VirtualMachineInstanceSpec{
		Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{Disks: []*apiv1.Disk{
			{Name: "root", BootOrder: 1},
			{Name: "data"},
			{Name: "hot1", Disk: &apiv1.DiskTarget{Bus: "scsi"}},
		}}},
		Volumes: []*apiv1.Volume{
			{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
			{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}},
			{Name: "hot1", Persistent: &apiv1.PersistentVolume{Size: "1Gi", Hotpluggable: true}},
		},
	}
}

func addDisk(s *apiv1.VirtualMachineInstanceSpec, at int, d *apiv1.Disk, v *apiv1.Volume) {
	s.Domain.Devices.Disks = slices.Insert(s.Domain.Devices.Disks, at, d)
	s.Volumes = slices.Insert(s.Volumes, at, v)
}

func removeDisk(s *apiv1.VirtualMachineInstanceSpec, name string) {
	s.Domain.Devices.Disks = slices.DeleteFunc(s.Domain.Devices.Disks, func(d *apiv1.Disk) bool { return d.Name == name })
	s.Volumes = slices.DeleteFunc(s.Volumes, func(v *apiv1.Volume) bool { return v.Name == name })
}

func hotVol(name, size string) *apiv1.Volume {
	return &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: size, Hotpluggable: true}}
}

func names[T interface{ GetName() string }](l []T) string {
	var out []string
	for _, x := range l {
		out = append(out, x.GetName())
	}
	return strings.Join(out, ",")
}

func TestLiveDisks(t *testing.T) {
	cases := []struct {
		name     string
		want     func(s *apiv1.VirtualMachineInstanceSpec)
		complete bool
		disks    string // the instance's disks after the change
		added    []string
		removed  []string
		grown    []string
	}{
		{"unchanged", func(*apiv1.VirtualMachineInstanceSpec) {}, true, "root,data,hot1", nil, nil, nil},
		{"hotpluggable disk added at the end", func(s *apiv1.VirtualMachineInstanceSpec) {
			addDisk(s, 3, &apiv1.Disk{Name: "hot2"}, hotVol("hot2", "2Gi"))
		}, true, "root,data,hot1,hot2", []string{"hot2"}, nil, nil},
		{"hotpluggable disk added in the middle: plugged after the others", func(s *apiv1.VirtualMachineInstanceSpec) {
			addDisk(s, 1, &apiv1.Disk{Name: "hot2"}, hotVol("hot2", "2Gi"))
		}, true, "root,data,hot1,hot2", []string{"hot2"}, nil, nil},
		{"hotpluggable disk removed", func(s *apiv1.VirtualMachineInstanceSpec) { removeDisk(s, "hot1") },
			true, "root,data", nil, []string{"hot1"}, nil},
		{"one removed, one added, a volume grown", func(s *apiv1.VirtualMachineInstanceSpec) {
			removeDisk(s, "hot1")
			addDisk(s, 2, &apiv1.Disk{Name: "hot2"}, hotVol("hot2", "2Gi"))
			s.Volumes[1].Persistent.Size = "4Gi"
		}, true, "root,data,hot2", []string{"hot2"}, []string{"hot1"}, []string{"data: 1Gi → 4Gi"}},
		{"plain persistent disk added: a restart", func(s *apiv1.VirtualMachineInstanceSpec) {
			addDisk(s, 3, &apiv1.Disk{Name: "cold"}, &apiv1.Volume{Name: "cold", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}})
		}, false, "root,data,hot1", nil, nil, nil},
		{"plain persistent disk removed: a restart", func(s *apiv1.VirtualMachineInstanceSpec) { removeDisk(s, "data") },
			false, "root,data,hot1", nil, nil, nil},
		{"hotpluggable added next to a restart change: plugged all the same", func(s *apiv1.VirtualMachineInstanceSpec) {
			removeDisk(s, "data")
			addDisk(s, 2, &apiv1.Disk{Name: "hot2"}, hotVol("hot2", "2Gi"))
		}, false, "root,data,hot1,hot2", []string{"hot2"}, nil, nil},
		{"bus of a hotpluggable disk changed: a restart", func(s *apiv1.VirtualMachineInstanceSpec) {
			s.Domain.Devices.Disks[2].Disk.Bus = "virtio"
		}, false, "root,data,hot1", nil, nil, nil},
		{"made hotpluggable: a restart", func(s *apiv1.VirtualMachineInstanceSpec) {
			s.Volumes[1].Persistent.Hotpluggable = true
		}, false, "root,data,hot1", nil, nil, nil},
		{"no longer hotpluggable: a restart", func(s *apiv1.VirtualMachineInstanceSpec) {
			s.Volumes[2].Persistent.Hotpluggable = false
		}, false, "root,data,hot1", nil, nil, nil},
		{"plain disks reordered: a restart", func(s *apiv1.VirtualMachineInstanceSpec) {
			d := s.Domain.Devices.Disks
			d[0], d[1] = d[1], d[0]
		}, false, "root,data,hot1", nil, nil, nil},
		{"shrunk: a restart", func(s *apiv1.VirtualMachineInstanceSpec) { s.Volumes[1].Persistent.Size = "512Mi" },
			false, "root,data,hot1", nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			have := liveSpec()
			before := proto.Clone(have)
			want := liveSpec()
			tc.want(want)
			c, complete := LiveDisks(want, have)
			if complete != tc.complete {
				t.Errorf("complete = %v, want %v", complete, tc.complete)
			}
			if got := names(c.Disks); got != tc.disks {
				t.Errorf("disks = %s, want %s", got, tc.disks)
			}
			if got := names(c.Volumes); got != tc.disks {
				t.Errorf("volumes = %s, want %s (one per disk)", got, tc.disks)
			}
			if !slices.Equal(c.Added, tc.added) || !slices.Equal(c.Removed, tc.removed) || !slices.Equal(c.Grown, tc.grown) {
				t.Errorf("added %v removed %v grown %v, want %v %v %v", c.Added, c.Removed, c.Grown, tc.added, tc.removed, tc.grown)
			}
			if c.Changed() != (len(tc.added)+len(tc.removed)+len(tc.grown) > 0) {
				t.Errorf("Changed() = %v", c.Changed())
			}
			if !proto.Equal(have, before) {
				t.Error("LiveDisks changed have")
			}
			if complete {
				// Applied, nothing is left: the instance matches.
				next := proto.Clone(have).(*apiv1.VirtualMachineInstanceSpec)
				next.Domain.Devices.Disks, next.Volumes = c.Disks, c.Volumes
				if again, ok := LiveDisks(want, next); !ok || again.Changed() {
					t.Errorf("applied again: %+v, complete %v", again, ok)
				}
			}
		})
	}
}

func TestVolumeStatusValidation(t *testing.T) {
	p := field.NewPath("status")
	ok := []*apiv1.VolumeStatus{
		{Name: "hot1", Phase: apiv1.VolumeReady, Target: "sdb"},
		{Name: "hot2", Phase: apiv1.VolumeAttachedToNode, Reason: apiv1.ReasonAttachFailed, Message: "no free PCI slot"},
		{Name: "old", Phase: apiv1.VolumeDetaching, Target: "vdc", Reason: apiv1.ReasonDetachTimeout},
	}
	if errs := ValidateVirtualMachineInstanceStatus(&apiv1.VirtualMachineInstanceStatus{VolumeStatus: ok}, p); len(errs) > 0 {
		t.Fatalf("valid statuses refused: %v", errs)
	}
	bad := []*apiv1.VolumeStatus{
		{Name: "hot1", Phase: "Mounted"},
		{Name: "hot1", Phase: apiv1.VolumeReady},
		{Name: "Bad_Name", Phase: apiv1.VolumeReady},
		{Name: "t", Phase: apiv1.VolumeReady, Target: "../../etc"},
		{Name: "m", Phase: apiv1.VolumeReady, Reason: "a\x00b"},
	}
	expectErrors(t, ValidateVirtualMachineInstanceStatus(&apiv1.VirtualMachineInstanceStatus{VolumeStatus: bad}, p),
		notSupported("status.volume_status[0].phase"),
		duplicate("status.volume_status[1].name"),
		invalid("status.volume_status[2].name"),
		invalid("status.volume_status[3].target"),
		invalid("status.volume_status[4].reason"),
	)
	many := make([]*apiv1.VolumeStatus, maxVolumeStatuses+1)
	for i := range many {
		many[i] = &apiv1.VolumeStatus{Name: "v", Phase: apiv1.VolumeReady}
	}
	expectErrors(t, ValidateVirtualMachineInstanceStatus(&apiv1.VirtualMachineInstanceStatus{VolumeStatus: many}, p),
		tooMany("status.volume_status"))
}
