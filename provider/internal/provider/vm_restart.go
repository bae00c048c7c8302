package provider

import (
	"context"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// restartChanges names the attributes whose change between state and plan
// the running guest only sees after a restart. The comparison is on the
// API objects after the agent's defaulting, as the VM controller's
// RestartRequired check is, so spellings and defaults do not count.
func restartChanges(ctx context.Context, state, plan *vmModel) []string {
	from, d1 := vmFromModel(ctx, state)
	to, d2 := vmFromModel(ctx, plan)
	if d1.HasError() || d2.HasError() {
		return nil
	}
	validation.DefaultVirtualMachine(from)
	validation.DefaultVirtualMachine(to)
	a, b := from.Spec.Template.Spec, to.Spec.Template.Spec
	var out []string
	if !proto.Equal(a.Domain.Cpu, b.Domain.Cpu) {
		out = append(out, "cpu")
	}
	if !proto.Equal(a.Domain.Memory, b.Domain.Memory) {
		out = append(out, "memory")
	}
	if !equalDisks(a, b) {
		out = append(out, "disk")
	}
	if !proto.Equal(a.Domain.Firmware, b.Domain.Firmware) {
		out = append(out, "boot")
	}
	if !equalInterfaces(a, b) {
		out = append(out, "interface")
	}
	if !equalStringMaps(a.NodeSelector, b.NodeSelector) {
		out = append(out, "node_selector")
	}
	return out
}

func equalDisks(a, b *apiv1.VirtualMachineInstanceSpec) bool {
	if len(a.Volumes) != len(b.Volumes) || len(a.Domain.Devices.Disks) != len(b.Domain.Devices.Disks) {
		return false
	}
	for i := range a.Volumes {
		if !proto.Equal(a.Volumes[i], b.Volumes[i]) {
			return false
		}
	}
	for i := range a.Domain.Devices.Disks {
		if !proto.Equal(a.Domain.Devices.Disks[i], b.Domain.Devices.Disks[i]) {
			return false
		}
	}
	return true
}

func equalInterfaces(a, b *apiv1.VirtualMachineInstanceSpec) bool {
	if len(a.Domain.Devices.Interfaces) != len(b.Domain.Devices.Interfaces) {
		return false
	}
	for i := range a.Domain.Devices.Interfaces {
		if !proto.Equal(a.Domain.Devices.Interfaces[i], b.Domain.Devices.Interfaces[i]) {
			return false
		}
	}
	return true
}

func equalStringMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
