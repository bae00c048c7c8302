package fakenode

import (
	"context"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// volumeStatuses is what a running guest's hotpluggable volumes report
// on a real node once every plug has settled: each Ready, with the
// target libvirt would give it (vd* for virtio, sd* for the rest, in the
// order of the disks), in the spec's order. Volumes added to or removed
// from the running instance's spec are plugged and unplugged at once.
func volumeStatuses(spec *apiv1.VirtualMachineInstanceSpec) []*apiv1.VolumeStatus {
	hot := apiv1.HotpluggableVolumes(spec)
	if len(hot) == 0 {
		return nil
	}
	var out []*apiv1.VolumeStatus
	next := map[string]int{}
	for _, d := range spec.GetDomain().GetDevices().GetDisks() {
		prefix := "sd"
		if d.GetCdrom() == nil && (d.GetDisk().GetBus() == "" || d.GetDisk().GetBus() == "virtio") {
			prefix = "vd"
		}
		i := next[prefix]
		next[prefix]++
		if hot[d.GetName()] && i < 26 {
			out = append(out, &apiv1.VolumeStatus{Name: d.GetName(), Phase: apiv1.VolumeReady, Target: prefix + string(rune('a'+i))})
		}
	}
	return out
}

// syncVolumes writes the volume statuses of a running instance's spec
// when they differ from those it has.
func (n *Node) syncVolumes(ctx context.Context, vmi *apiv1.VirtualMachineInstance) {
	want := volumeStatuses(vmi.GetSpec())
	if equalVolumeStatuses(want, vmi.GetStatus().GetVolumeStatus()) {
		return
	}
	key, uid := vmi.Metadata.Namespace+"/"+vmi.Metadata.Name, vmi.Metadata.Uid
	go n.setStatus(ctx, key, uid, func(st *apiv1.VirtualMachineInstanceStatus, _ time.Time) {
		if st.Phase == apiv1.PhaseRunning {
			st.VolumeStatus = want
		}
	})
}

func equalVolumeStatuses(a, b []*apiv1.VolumeStatus) bool {
	return slices.EqualFunc(a, b, func(x, y *apiv1.VolumeStatus) bool { return proto.Equal(x, y) })
}
