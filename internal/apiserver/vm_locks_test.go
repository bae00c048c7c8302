package apiserver

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// lockVM sets the VM's locks as the snapshot and restore controllers do,
// through the store.
func (f *fixture) lockVM(t *testing.T, name, snapshot, restore string) *apiv1.VirtualMachine {
	t.Helper()
	vm, err := f.st.VMs.GuaranteedUpdate(context.Background(), "default", name, func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Status.SnapshotInProgress, vm.Status.RestoreInProgress = snapshot, restore
		return vm, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func wantRefusal(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if code(err) != codes.FailedPrecondition || status.Convert(err).Message() != msg {
		t.Fatalf("%s: %v, want FailedPrecondition %q", what, err, msg)
	}
}

func TestVMLockedBySnapshot(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")}); err != nil {
		t.Fatal(err)
	}
	vm := f.lockVM(t, "web", "s1", "")
	const running = `Cannot update vm running state until snapshot "s1" completes`
	_, err := f.vms.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: key("web")})
	wantRefusal(t, "stop", err, running)
	_, err = f.vms.Start(ctx, &apiv1.StartVirtualMachineRequest{Key: key("web")})
	wantRefusal(t, "start", err, running)
	_, err = f.vms.Restart(ctx, &apiv1.RestartVirtualMachineRequest{Key: key("web")})
	wantRefusal(t, "restart", err, running)
	_, err = f.vms.Unpause(ctx, &apiv1.UnpauseVirtualMachineRequest{Key: key("web")})
	wantRefusal(t, "unpause", err, `Cannot unpause vm until snapshot "s1" completes`)

	update := func(change func(*apiv1.VirtualMachine)) error {
		upd := proto.Clone(vm).(*apiv1.VirtualMachine)
		change(upd)
		_, err := f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd})
		return err
	}
	wantRefusal(t, "run strategy", update(func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "Halted" }), running)
	wantRefusal(t, "running", update(func(vm *apiv1.VirtualMachine) {
		vm.Spec.RunStrategy = ""
		//lint:ignore SA1019 a VM written with the deprecated flag is what is tested
		vm.Spec.Running = proto.Bool(true)
	}), running)
	const disks = `Cannot update vm disks or volumes until snapshot "s1" completes`
	wantRefusal(t, "a new disk", update(func(vm *apiv1.VirtualMachine) {
		s := vm.Spec.Template.Spec
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, &apiv1.Disk{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}})
		s.Volumes = append(s.Volumes, &apiv1.Volume{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}})
	}), disks)
	wantRefusal(t, "a disk's bus", update(func(vm *apiv1.VirtualMachine) {
		vm.Spec.Template.Spec.Domain.Devices.Disks[0].Disk.Bus = "sata"
	}), disks)
	// Other changes go on: memory, labels.
	if err := update(func(vm *apiv1.VirtualMachine) {
		vm.Spec.Template.Spec.Domain.Memory.Guest = "2Gi"
		vm.Metadata.Labels["tier"] = "front"
	}); err != nil {
		t.Fatalf("memory change during a snapshot: %v", err)
	}

	// Unlocked: the verbs work again.
	f.lockVM(t, "web", "", "")
	if _, err := f.vms.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: key("web")}); err != nil {
		t.Fatalf("stop after the snapshot: %v", err)
	}
}

func TestVMLockedByRestore(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	vm := validVM("web")
	vm.Spec.RunStrategy = "Halted"
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	vm = f.lockVM(t, "web", "", "r1")
	const runStrategy = `Cannot update VM runStrategy until restore "r1" completes`
	_, err := f.vms.Start(ctx, &apiv1.StartVirtualMachineRequest{Key: key("web")})
	wantRefusal(t, "start", err, runStrategy)
	_, err = f.vms.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: key("web")})
	wantRefusal(t, "stop", err, runStrategy)
	upd := proto.Clone(vm).(*apiv1.VirtualMachine)
	upd.Spec.RunStrategy = "Always"
	_, err = f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd})
	wantRefusal(t, "run strategy", err, runStrategy)
	upd = proto.Clone(vm).(*apiv1.VirtualMachine)
	upd.Spec.Template.Spec.Domain.Memory.Guest = "2Gi"
	_, err = f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd})
	wantRefusal(t, "memory", err, `Cannot update vm spec until restore "r1" completes`)
	// Labels are no spec.
	upd = proto.Clone(vm).(*apiv1.VirtualMachine)
	upd.Metadata.Labels["restored"] = "soon"
	if _, err := f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd}); err != nil {
		t.Fatalf("label change during a restore: %v", err)
	}
}

func TestVMDeleteSnapshots(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	web, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("db")}); err != nil {
		t.Fatal(err)
	}
	mk := func(name, source, sourceUID string, finalizers ...string) {
		if _, err := f.st.Snapshots.Create(ctx, &apiv1.VirtualMachineSnapshot{
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Finalizers: finalizers},
			Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: source, DeletionPolicy: apiv1.DeletionPolicyDelete},
			Status:   &apiv1.VirtualMachineSnapshotStatus{SourceUid: sourceUID},
		}); err != nil {
			t.Fatal(err)
		}
	}
	mk("web-1", "web", web.Metadata.Uid, apiv1.FinalizerSnapshot) // the controller's: held until it deletes the content
	mk("web-2", "web", "")                                        // not yet looked at by the controller
	mk("web-old", "web", "6f1c2a3e-0000-4000-8000-000000000009")  // of an earlier VM named web
	mk("db-1", "db", "")

	// Without delete_snapshots they stay.
	if _, err := f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key("db")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Snapshots.Get(ctx, "default", "db-1"); err != nil {
		t.Fatalf("db's snapshot went with db: %v", err)
	}
	// A failing uid precondition deletes nothing.
	_, err = f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key("web"), DeleteSnapshots: true,
		Options: &apiv1.DeleteOptions{Uid: "6f1c2a3e-0000-4000-8000-000000000009"}})
	if code(err) != codes.Aborted {
		t.Fatalf("delete with a wrong uid: %v", err)
	}
	if _, err := f.st.Snapshots.Get(ctx, "default", "web-2"); err != nil {
		t.Fatalf("a refused VM delete deleted a snapshot: %v", err)
	}

	if _, err := f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key("web"), DeleteSnapshots: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key("web")}); code(err) != codes.NotFound {
		t.Fatalf("web: %v", err)
	}
	if _, err := f.st.Snapshots.Get(ctx, "default", "web-2"); code(toStatus(err)) != codes.NotFound {
		t.Fatalf("web-2: %v", err)
	}
	held, err := f.st.Snapshots.Get(ctx, "default", "web-1")
	if err != nil || held.Metadata.DeletionTimestamp == nil {
		t.Fatalf("web-1 (finalizer) should be deleting: %v %v", held, err)
	}
	for _, keep := range []string{"web-old", "db-1"} {
		if s, err := f.st.Snapshots.Get(ctx, "default", keep); err != nil || s.Metadata.DeletionTimestamp != nil {
			t.Fatalf("%s is not web's and should stay: %v %v", keep, s, err)
		}
	}
}
