package fakenode

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Only hotpluggable volumes have a status, Ready, with the target their
// bus gives them in the order of the disks.
func TestVolumeStatuses(t *testing.T) {
	disk := func(name, bus string) *apiv1.Disk {
		return &apiv1.Disk{Name: name, Disk: &apiv1.DiskTarget{Bus: bus}}
	}
	vol := func(name string, hot bool) *apiv1.Volume {
		return &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: "1Gi", Hotpluggable: hot}}
	}
	spec := &apiv1.VirtualMachineInstanceSpec{
		Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{Disks: []*apiv1.Disk{
			disk("root", ""), {Name: "seed", Cdrom: &apiv1.CDRomTarget{}}, disk("hot1", "virtio"), disk("hot2", "scsi"), disk("cold", "virtio"),
		}}},
		Volumes: []*apiv1.Volume{vol("root", false), {Name: "seed"}, vol("hot1", true), vol("hot2", true), vol("cold", false)},
	}
	got := volumeStatuses(spec)
	want := []*apiv1.VolumeStatus{
		{Name: "hot1", Phase: apiv1.VolumeReady, Target: "vdb"},
		{Name: "hot2", Phase: apiv1.VolumeReady, Target: "sdb"},
	}
	if !equalVolumeStatuses(got, want) {
		t.Fatalf("volume statuses %v, want %v", got, want)
	}
	if got := volumeStatuses(&apiv1.VirtualMachineInstanceSpec{Volumes: []*apiv1.Volume{vol("root", false)}}); got != nil {
		t.Fatalf("without hotpluggable volumes: %v, want none", got)
	}
}
