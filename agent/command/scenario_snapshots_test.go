package command

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// snapshotVM is an Always VM with a persistent volume and an interface.
func snapshotVM(name string) *apiv1.VirtualMachine {
	vm := scenarioVM(name, apiv1.RunStrategyAlways, "", "")
	spec := vm.Spec.Template.Spec
	spec.Volumes = []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}}}
	spec.Domain.Devices = &apiv1.Devices{
		Disks:      []*apiv1.Disk{{Name: "data"}},
		Interfaces: []*apiv1.Interface{{Name: "default"}},
	}
	vm.Spec.Template.Spec.Networks = []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{}}}
	return vm
}

func (s *scenario) createSnapshot(name, source string, deadline *int64) {
	s.t.Helper()
	if _, err := s.c.Snapshots.Create(s.ctx, &apiv1.CreateSnapshotRequest{Snapshot: &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: source, FailureDeadlineSeconds: deadline},
	}}); err != nil {
		s.t.Fatal(err)
	}
}

// waitSnapshot waits until snapshot name is in phase and returns it.
func (s *scenario) waitSnapshot(name, phase string) *apiv1.VirtualMachineSnapshot {
	s.t.Helper()
	var snap *apiv1.VirtualMachineSnapshot
	testutil.EventuallyNoError(s.t, 30*time.Second, "snapshot "+name+" "+phase, func() error {
		var err error
		if snap, err = s.c.Snapshots.Get(s.ctx, &apiv1.GetSnapshotRequest{Key: s.key(name)}); err != nil {
			return err
		}
		if snap.GetStatus().GetPhase() != phase {
			return fmt.Errorf("status %v", snap.GetStatus())
		}
		return nil
	})
	return snap
}

func (s *scenario) stopAndWait(name string) {
	s.t.Helper()
	if _, err := s.c.VMs.Stop(s.ctx, &apiv1.StopVirtualMachineRequest{Key: s.key(name)}); err != nil {
		s.t.Fatal(err)
	}
	testutil.Eventually(s.t, 20*time.Second, name+" stopped", func() bool { return s.vmi(name) == nil })
}

// Snapshot a running VM, stop it, change it, restore it in place: the
// spec is the snapshot's again (run strategy kept), the VM unlocked and
// the restore's node finalizer gone.
func TestScenarioSnapshotAndRestoreInPlace(t *testing.T) {
	s := newScenario(t, "snap-a")
	s.create(snapshotVM("web"))
	s.waitRunning("web", "")
	s.createSnapshot("snap", "web", nil)
	snap := s.waitSnapshot("snap", apiv1.SnapshotSucceeded)
	st := snap.GetStatus()
	if !st.GetReadyToUse() || st.GetNodeName() != "snap-a" || fmt.Sprint(st.GetIncludedVolumes()) != "[data]" ||
		fmt.Sprint(st.GetIndications()) != fmt.Sprint([]string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent}) {
		t.Fatalf("snapshot status %v", st)
	}
	if got := s.vm("web").GetStatus().GetSnapshotInProgress(); got != "" {
		t.Fatalf("VM still locked by %q", got)
	}

	s.stopAndWait("web")
	// The VM controller may still be writing the VM's status after the
	// stop: a conflict is read again and retried, as a client does.
	testutil.EventuallyNoError(t, 20*time.Second, "web's memory changed", func() error {
		vm := s.vm("web")
		vm.Spec.Template.Spec.Domain.Memory.Guest = "512Mi"
		_, err := s.c.VMs.Update(s.ctx, &apiv1.UpdateVirtualMachineRequest{Vm: vm})
		return err
	})
	if _, err := s.c.Restores.Create(s.ctx, &apiv1.CreateRestoreRequest{Restore: &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Name: "rest"},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: "web", Snapshot: "snap"},
	}}); err != nil {
		t.Fatal(err)
	}
	var r *apiv1.VirtualMachineRestore
	testutil.EventuallyNoError(t, 30*time.Second, "restore done and released by the node", func() error {
		var err error
		if r, err = s.c.Restores.Get(s.ctx, &apiv1.GetRestoreRequest{Key: s.key("rest")}); err != nil {
			return err
		}
		if st := r.GetStatus(); st.GetPhase() != apiv1.RestoreSucceeded || !st.GetComplete() {
			return fmt.Errorf("status %v", st)
		}
		if fs := r.GetMetadata().GetFinalizers(); len(fs) != 1 || fs[0] != apiv1.FinalizerRestore {
			return fmt.Errorf("finalizers %v", fs)
		}
		return nil
	})
	vm := s.vm("web")
	if g := vm.Spec.Template.Spec.Domain.Memory.Guest; g != "256Mi" {
		t.Fatalf("memory %s, want the snapshot's 256Mi", g)
	}
	//lint:ignore SA1019 either way of halting counts as kept
	running := vm.Spec.Running
	if vm.Spec.GetRunStrategy() != apiv1.RunStrategyHalted && running == nil {
		t.Fatalf("run strategy %q running %v: not kept from before the restore", vm.Spec.GetRunStrategy(), running)
	}
	if vm.Metadata.Annotations[apiv1.AnnotationLastRestore] != apiv1.LastRestoreValue("rest", r.Metadata.Uid) || vm.Status.GetRestoreInProgress() != "" {
		t.Fatalf("VM %v", vm)
	}

	// Deleting the snapshot deletes its content once the node dropped it.
	if _, err := s.c.Snapshots.Delete(s.ctx, &apiv1.DeleteSnapshotRequest{Key: s.key("snap")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, "snapshot and content gone", func() bool {
		_, serr := s.c.Snapshots.Get(s.ctx, &apiv1.GetSnapshotRequest{Key: s.key("snap")})
		_, cerr := s.c.SnapshotContents.Get(s.ctx, &apiv1.GetSnapshotContentRequest{Key: s.key(st.GetContentName())})
		return status.Code(serr) == codes.NotFound && status.Code(cerr) == codes.NotFound
	})
}

// A clone of a running VM: a new halted VM on the same node with a new
// MAC, and the clone's snapshot and restore deleted.
func TestScenarioClone(t *testing.T) {
	s := newScenario(t, "clone-a")
	s.create(snapshotVM("web"))
	s.waitRunning("web", "")
	cl, err := s.c.Clones.Create(s.ctx, &apiv1.CreateCloneRequest{Clone: &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Name: "cl"},
		Spec:     &apiv1.VirtualMachineCloneSpec{SourceName: "web", Target: "copy", Labels: map[string]string{"cloned": "yes"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, 30*time.Second, "clone succeeded", func() error {
		got, err := s.c.Clones.Get(s.ctx, &apiv1.GetCloneRequest{Key: s.key("cl")})
		if err != nil {
			return err
		}
		if got.GetStatus().GetPhase() != apiv1.CloneSucceeded {
			return fmt.Errorf("status %v", got.GetStatus())
		}
		return nil
	})
	src, cp := s.vm("web"), s.vm("copy")
	if cp.Spec.GetRunStrategy() != apiv1.RunStrategyHalted || cp.Status.GetNodeName() != "clone-a" || cp.Metadata.Labels["cloned"] != "yes" ||
		cp.Status.GetRestoreInProgress() != "" {
		t.Fatalf("clone %v", cp)
	}
	srcMAC := src.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress
	cpMAC := cp.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress
	if cpMAC == "" || cpMAC == srcMAC {
		t.Fatalf("clone MAC %q, source %q", cpMAC, srcMAC)
	}
	uid := cl.GetMetadata().GetUid()
	testutil.Eventually(t, 30*time.Second, "the clone's snapshot and restore gone", func() bool {
		_, serr := s.c.Snapshots.Get(s.ctx, &apiv1.GetSnapshotRequest{Key: s.key(apiv1.CloneSnapshotName(uid))})
		_, rerr := s.c.Restores.Get(s.ctx, &apiv1.GetRestoreRequest{Key: s.key(apiv1.CloneRestoreName(uid))})
		return status.Code(serr) == codes.NotFound && status.Code(rerr) == codes.NotFound
	})
	if s.vm("web").Status.GetSnapshotInProgress() != "" || s.vmi("web") == nil {
		t.Fatal("source left locked or stopped")
	}
}

// While a snapshot holds a VM it cannot be started. A snapshot that fails
// its deadline because the VM's node is gone keeps the VM locked, as the
// node may still have to merge an overlay back; deleting the snapshot
// lets the VM go.
func TestScenarioStartRefusedWhileSnapshotLocked(t *testing.T) {
	s := newScenario(t, "lock-a")
	s.create(snapshotVM("web"))
	s.waitRunning("web", "")
	s.stopAndWait("web")
	// Nobody copies: the content stays in progress and the VM locked.
	s.nodes["lock-a"].Kill()
	s.createSnapshot("snap", "web", proto.Int64(4))
	testutil.Eventually(t, 20*time.Second, "VM locked", func() bool { return s.vm("web").GetStatus().GetSnapshotInProgress() == "snap" })
	_, err := s.c.VMs.Start(s.ctx, &apiv1.StartVirtualMachineRequest{Key: s.key("web")})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), `until snapshot "snap" completes`) {
		t.Fatalf("start while locked: %v", err)
	}
	snap := s.waitSnapshot("snap", apiv1.SnapshotFailed)
	if snap.GetStatus().GetError() != "snapshot deadline exceeded" {
		t.Fatalf("status %v", snap.GetStatus())
	}
	if got := s.vm("web").GetStatus().GetSnapshotInProgress(); got != "snap" {
		t.Fatalf("VM lock %q after the deadline with its node gone, want snap", got)
	}
	if _, err := s.c.Snapshots.Delete(s.ctx, &apiv1.DeleteSnapshotRequest{Key: s.key("snap")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, "VM unlocked", func() bool { return s.vm("web").GetStatus().GetSnapshotInProgress() == "" })
	if _, err := s.c.VMs.Start(s.ctx, &apiv1.StartVirtualMachineRequest{Key: s.key("web")}); err != nil {
		t.Fatalf("start after the snapshot's deletion: %v", err)
	}
}
