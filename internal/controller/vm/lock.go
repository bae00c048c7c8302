package vm

import apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

// startBlocked says why no new instance of vm may start now, "" when one
// may: a snapshot or a restore holds the VM (docs/snapshots.md, "The
// lock"). A snapshot copies the volumes a new instance would write, and a
// restore replaces them under it. An instance already running is left
// alone: an online snapshot is taken from it, and a restore waits for the
// target to stop. The unlock is a VM write, whose event brings the VM
// back here.
func startBlocked(vm *apiv1.VirtualMachine) string {
	if by := apiv1.LockedBy(vm); by != "" {
		return by + " in progress"
	}
	return ""
}
