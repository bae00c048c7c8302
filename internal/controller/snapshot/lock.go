package snapshot

import (
	"context"
	"errors"
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Condition types and reasons. Progressing is the snapshot kinds' own
// condition (KubeVirt's); the reasons say in one word what KubeVirt's
// reason strings say, which go into the messages.
const (
	ConditionProgressing = "Progressing"

	reasonInProgress    = "InProgress"
	reasonNotLocked     = "SourceNotLocked"
	reasonSourceMissing = "SourceDoesNotExist"
	reasonComplete      = "Complete"
	reasonFailed        = "Failed"
	reasonReady         = "Ready"
	reasonNotReady      = "NotReady"

	msgDeadlineExceeded = "snapshot deadline exceeded"
)

// notLockedError says why the VM cannot be locked now; the snapshot waits.
type notLockedError struct{ why string }

func (e *notLockedError) Error() string { return "source not locked: " + e.why }

// errGone stops a lock write on a VM that was replaced meanwhile.
var errGone = errors.New("source VM replaced")

// lock makes the snapshot the VM's snapshot_in_progress, or says why it
// cannot (*notLockedError); nil, nil when the VM is gone. It returns the
// VM as locked: the content copies that version. The check of the
// instance's migration uses the cache: a migration that starts after the
// lock finds the VM locked (the migration controller's concern).
func (c *Controller) lock(ctx context.Context, s *apiv1.VirtualMachineSnapshot, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
	name := s.GetMetadata().GetName()
	if vm.GetStatus().GetSnapshotInProgress() == name {
		return vm, nil // ours already (an earlier pass)
	}
	if why := lockBlocked(vm, name); why != "" {
		return nil, &notLockedError{why}
	}
	if vmi, ok := c.vmis.Get(vm.GetMetadata().GetNamespace(), vm.GetMetadata().GetName()); ok && apiv1.IsControlledBy(vmi, vm) && migrating(vmi) {
		return nil, &notLockedError{"VMI is migrating"}
	}
	uid := vm.GetMetadata().GetUid()
	out, err := c.vmSt.GuaranteedUpdate(ctx, vm.GetMetadata().GetNamespace(), vm.GetMetadata().GetName(), func(cur *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		if cur.GetMetadata().GetUid() != uid {
			return nil, errGone
		}
		if why := lockBlocked(cur, name); why != "" {
			return nil, &notLockedError{why}
		}
		if cur.Status == nil {
			cur.Status = &apiv1.VirtualMachineStatus{}
		}
		cur.Status.SnapshotInProgress = name
		return cur, nil
	})
	var nl *notLockedError
	switch {
	case errors.As(err, &nl):
		return nil, nl
	case errors.Is(err, errGone), errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("locking VM %s: %w", apiv1.Ref(vm.GetMetadata().GetNamespace(), vm.GetMetadata().GetName()), err)
	}
	c.log.Info("VM locked for snapshot", "vm", apiv1.Ref(out.Metadata.Namespace, out.Metadata.Name), "snapshot", name)
	return out, nil
}

// lockBlocked says why snapshot name cannot take vm's lock, "" if it can.
func lockBlocked(vm *apiv1.VirtualMachine, name string) string {
	st := vm.GetStatus()
	switch {
	case vm.GetMetadata().GetDeletionTimestamp() != nil:
		return "VM is being deleted"
	case st.GetSnapshotInProgress() != "" && st.GetSnapshotInProgress() != name:
		return fmt.Sprintf("snapshot %q in progress", st.GetSnapshotInProgress())
	case st.GetRestoreInProgress() != "":
		return fmt.Sprintf("restore %q in progress", st.GetRestoreInProgress())
	}
	return ""
}

// unlock clears the VM's lock if this snapshot holds it. With fresh the
// stored VM decides (before the snapshot's final write, which must mean
// an unlocked VM even when the cache has not shown the lock yet);
// otherwise the cache says whether to write at all, which keeps the
// passes a finished snapshot gets on every VM event free of store reads.
// A lock the cache misses then is cleared on the VM event that shows it.
func (c *Controller) unlock(ctx context.Context, s *apiv1.VirtualMachineSnapshot, fresh bool) error {
	ns, name, vmName := s.GetMetadata().GetNamespace(), s.GetMetadata().GetName(), s.GetSpec().GetSource()
	if vm, ok := c.vms.Get(ns, vmName); !fresh && (!ok || vm.GetStatus().GetSnapshotInProgress() != name) {
		return nil
	}
	unlocked := false
	_, err := c.vmSt.GuaranteedUpdate(ctx, ns, vmName, func(cur *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		if cur.GetStatus().GetSnapshotInProgress() == name {
			cur.Status.SnapshotInProgress = ""
			unlocked = true
		}
		return cur, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("unlocking VM %s: %w", apiv1.Ref(ns, vmName), err)
	}
	if unlocked {
		c.log.Info("VM unlocked", "vm", apiv1.Ref(ns, vmName), "snapshot", name)
	}
	return nil
}
