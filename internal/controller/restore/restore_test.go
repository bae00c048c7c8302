package restore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// In place: the stopped VM is locked and the volumes handed to the node
// (Staging); once staged, the commit point; the spec becomes the
// snapshot's with the run strategy kept; once swapped, unlocked and
// Succeeded.
func TestRestoreInPlace(t *testing.T) {
	f := newFixture(t, newRestore("web"), nil, changedVM())
	f.settle(t)
	r := f.restore(t)
	if r.Status.Phase != apiv1.RestoreStaging || r.Status.TargetUid != "vm-uid" || r.Status.NodeName != "n1" ||
		r.Status.TargetCreated || r.Status.SpecRestored || r.Metadata.Labels[apiv1.LabelNodeName] != "n1" ||
		!slices.Equal(r.Metadata.Finalizers, []string{apiv1.FinalizerRestore, apiv1.FinalizerRestoreData}) ||
		len(r.Status.Restores) != 1 || r.Status.Restores[0].VolumeName != "data" || r.Status.Restores[0].SourcePath != "/data/snapshots/c/data.qcow2" {
		t.Fatalf("restore %v", r)
	}
	if got := f.vm("web").Status.RestoreInProgress; got != "rest" {
		t.Fatalf("lock %q", got)
	}
	if f.vm("web").Spec.Template.Spec.Domain.Memory.Guest != "256Mi" {
		t.Fatal("spec written before the commit point")
	}

	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Staged = true })
	f.settle(t)
	r = f.restore(t)
	if r.Status.Phase != apiv1.RestoreCommitting || !r.Status.SpecRestored {
		t.Fatalf("status %v", r.Status)
	}
	vm := f.vm("web")
	want := proto.Clone(sourceVM().Spec).(*apiv1.VirtualMachineSpec)
	want.RunStrategy = apiv1.RunStrategyManual
	if !proto.Equal(vm.Spec, want) || vm.Metadata.Generation != 5 ||
		vm.Metadata.Annotations[apiv1.AnnotationLastRestore] != apiv1.LastRestoreValue("rest", "rest-uid") {
		t.Fatalf("target %v", vm)
	}
	if vm.Status.RestoreInProgress != "rest" {
		t.Fatal("unlocked before the node swapped the volumes")
	}

	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Swapped = true })
	f.settle(t)
	r = f.restore(t)
	if r.Status.Phase != apiv1.RestoreSucceeded || !r.Status.Complete || r.Status.RestoreTime == nil ||
		!apiv1.IsConditionTrue(r.Status.Conditions, apiv1.ConditionReady) {
		t.Fatalf("status %v", r.Status)
	}
	if vm := f.vm("web"); vm.Status.RestoreInProgress != "" || vm.Metadata.Generation != 5 {
		t.Fatalf("target %v", vm)
	}
}

// A missing target is made halted from the snapshot, on its node, locked,
// with a new identity: the MACs asked for, new ones for the others.
func TestRestoreNewTarget(t *testing.T) {
	r := newRestore("copy")
	r.Spec.NewIdentity = true
	r.Spec.MacAddresses = map[string]string{"default": "02:aa:00:00:00:01"}
	r.Spec.Labels = map[string]string{"app": "copy", "extra": "x"}
	r.Spec.Annotations = map[string]string{"note": "n"}
	f := newFixture(t, r, nil, sourceVM())
	f.settle(t)
	vm := f.vm("copy")
	if vm == nil {
		t.Fatal("no target")
	}
	//lint:ignore SA1019 the deprecated flag must be cleared on a new target
	if vm.Spec.RunStrategy != apiv1.RunStrategyHalted || vm.Spec.Running != nil || vm.Status.NodeName != "n1" ||
		vm.Status.RestoreInProgress != "rest" {
		t.Fatalf("target %v", vm)
	}
	m := vm.Metadata
	if m.Labels["app"] != "copy" || m.Labels["extra"] != "x" || m.Annotations["team"] != "blue" || m.Annotations["note"] != "n" ||
		m.Annotations[apiv1.AnnotationLastRestore] != apiv1.LastRestoreValue("rest", "rest-uid") {
		t.Fatalf("metadata %v", m)
	}
	ifs := vm.Spec.Template.Spec.Domain.Devices.Interfaces
	if ifs[0].MacAddress != "02:aa:00:00:00:01" || ifs[1].MacAddress == "" || ifs[1].MacAddress == "02:00:00:00:00:02" {
		t.Fatalf("interfaces %v", ifs)
	}
	st := f.restore(t).Status
	if st.Phase != apiv1.RestoreStaging || !st.TargetCreated || !st.SpecRestored || st.TargetUid != vm.Metadata.Uid {
		t.Fatalf("status %v", st)
	}
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Staged = true })
	f.settle(t)
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Swapped = true })
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreSucceeded {
		t.Fatalf("status %v", st)
	}
	if got := f.vm("copy"); got.Status.RestoreInProgress != "" || got.Metadata.Generation != 1 {
		t.Fatalf("target %v", got)
	}
	if f.vm("web").Status.RestoreInProgress != "" {
		t.Fatal("source locked")
	}
}

// A crash between the target's create and the restore's next write: a
// fresh controller recognises the target it made by its annotation and
// lock, and goes on instead of refusing it as someone else's.
func TestRestoreResumesAfterCreate(t *testing.T) {
	made := sourceVM()
	made.Metadata.Name, made.Metadata.Uid = "copy", "copy-uid"
	made.Metadata.Annotations = map[string]string{apiv1.AnnotationLastRestore: apiv1.LastRestoreValue("rest", "rest-uid")}
	made.Status.RestoreInProgress = "rest"
	r := newRestore("copy")
	r.Metadata.Finalizers = []string{apiv1.FinalizerRestore}
	r.Status = &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestorePending}
	f := newFixture(t, r, nil, made)
	f.settle(t)
	st := f.restore(t).Status
	if st.Phase != apiv1.RestoreStaging || !st.TargetCreated || st.TargetUid != "copy-uid" {
		t.Fatalf("status %v", st)
	}
}

// A running target and the four readiness policies.
func TestRestoreReadinessPolicies(t *testing.T) {
	run := func(t *testing.T, policy string) *fixture {
		r := newRestore("web")
		r.Spec.TargetReadinessPolicy = policy
		return newFixture(t, r, runningVMI(), changedVM())
	}
	t.Run("FailImmediate", func(t *testing.T) {
		f := run(t, apiv1.ReadinessFailImmediate)
		f.settle(t)
		if st := f.restore(t).Status; st.Phase != apiv1.RestoreFailed || st.Error != "Restore target VMI must be powered off before restore operation" {
			t.Fatalf("status %v", st)
		}
	})
	t.Run("WaitGracePeriod", func(t *testing.T) {
		f := run(t, "")
		res := f.settle(t)
		if st := f.restore(t).Status; st.Phase != apiv1.RestorePending || res.RequeueAfter != 300*time.Second {
			t.Fatalf("status %v, requeue %v", st, res.RequeueAfter)
		}
		if f.vm("web").Status.RestoreInProgress != "" {
			t.Fatal("running target locked")
		}
		f.now = t0.Add(300 * time.Second)
		f.settle(t)
		if st := f.restore(t).Status; st.Phase != apiv1.RestoreFailed ||
			st.Error != "Restore target failed to be ready within 5m0s. Please power off the target VM before attempting restore" {
			t.Fatalf("status %v", st)
		}
	})
	t.Run("WaitEventually", func(t *testing.T) {
		f := run(t, apiv1.ReadinessWaitEventually)
		f.settle(t)
		f.now = t0.Add(time.Hour)
		f.settle(t)
		if st := f.restore(t).Status; st.Phase != apiv1.RestorePending {
			t.Fatalf("status %v", st)
		}
		// The instance goes: the restore proceeds.
		if _, _, err := f.vmis.Store.Delete(t.Context(), "default", "web", storeDeleteAll); err != nil {
			t.Fatal(err)
		}
		f.settle(t)
		if st := f.restore(t).Status; st.Phase != apiv1.RestoreStaging {
			t.Fatalf("status %v", st)
		}
	})
	t.Run("StopTarget", func(t *testing.T) {
		f := run(t, apiv1.ReadinessStopTarget)
		f.settle(t)
		st := f.restore(t).Status
		if st.Phase != apiv1.RestorePending || st.Message != "Automatically stopping restore target for restore operation" {
			t.Fatalf("status %v", st)
		}
		// Manual: the verb queues a stop of the running instance.
		reqs := f.vm("web").Status.StateChangeRequests
		if len(reqs) != 1 || reqs[0].Action != apiv1.StateChangeStop || reqs[0].Uid != "vmi-uid" {
			t.Fatalf("requests %v", reqs)
		}
	})
}

// KubeVirt's refusals of an existing target, and a snapshot not usable.
func TestRestoreRefusals(t *testing.T) {
	other := changedVM()
	other.Metadata.Uid = "other-uid"
	elsewhere := changedVM()
	elsewhere.Status.NodeName = "n2"
	for _, tc := range []struct {
		name string
		vm   *apiv1.VirtualMachine
		snap func(*apiv1.VirtualMachineSnapshot)
		want string
	}{
		{"different VM", other, nil, "restore source and restore target are different but restore target already exists"},
		{"other node", elsewhere, nil, `restore target "web" has its volumes on node "n2" but the snapshot's data is on node "n1"`},
		{"snapshot failed", changedVM(), func(s *apiv1.VirtualMachineSnapshot) {
			s.Status.Phase, s.Status.Error = apiv1.SnapshotFailed, "snapshot deadline exceeded"
		}, `VMSnapshot "snap" failed: snapshot deadline exceeded`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, newRestore("web"), nil, tc.vm)
			if tc.snap != nil {
				f.snaps.Update(t, "default", "snap", tc.snap)
			}
			f.settle(t)
			if st := f.restore(t).Status; st.Phase != apiv1.RestoreFailed || st.Error != tc.want {
				t.Fatalf("status %v", st)
			}
			if f.vm("web").Status.RestoreInProgress != "" {
				t.Fatal("left locked")
			}
		})
	}
	t.Run("snapshot not ready waits", func(t *testing.T) {
		f := newFixture(t, newRestore("web"), nil, changedVM())
		f.snaps.Update(t, "default", "snap", func(s *apiv1.VirtualMachineSnapshot) { s.Status.Phase = apiv1.SnapshotInProgress })
		f.settle(t)
		if st := f.restore(t).Status; st.Phase != apiv1.RestorePending || st.Message != `VMSnapshot "snap" not ready` {
			t.Fatalf("status %v", st)
		}
	})
	t.Run("target locked by a snapshot waits", func(t *testing.T) {
		vm := changedVM()
		vm.Status.SnapshotInProgress = "snap2"
		f := newFixture(t, newRestore("web"), nil, vm)
		if res := f.settle(t); res.RequeueAfter != waitRequeue {
			t.Fatalf("requeue %v", res.RequeueAfter)
		}
		if st := f.restore(t).Status; st.Phase != apiv1.RestorePending || !strings.Contains(st.Message, `snapshot "snap2"`) {
			t.Fatalf("status %v", st)
		}
	})
}

// The node's error before the commit point fails the restore: the target
// it made is deleted again; an existing target is unlocked, untouched.
func TestRestoreFailsBeforeCommit(t *testing.T) {
	t.Run("made target deleted", func(t *testing.T) {
		f := newFixture(t, newRestore("copy"), nil, sourceVM())
		f.settle(t)
		f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Error = "copying data: no space left on device" })
		f.settle(t)
		if st := f.restore(t).Status; st.Phase != apiv1.RestoreFailed || !strings.Contains(st.Error, "no space left") {
			t.Fatalf("status %v", st)
		}
		if vm := f.vm("copy"); vm != nil && vm.Metadata.DeletionTimestamp == nil {
			t.Fatalf("target kept: %v", vm)
		}
	})
	t.Run("existing target unlocked", func(t *testing.T) {
		f := newFixture(t, newRestore("web"), nil, changedVM())
		f.settle(t)
		if _, _, err := f.snaps.Store.Delete(t.Context(), "default", "snap", storeDeleteAll); err != nil {
			t.Fatal(err)
		}
		f.settle(t)
		if st := f.restore(t).Status; st.Phase != apiv1.RestoreFailed || st.Error != `VMSnapshot "snap" was deleted` {
			t.Fatalf("status %v", st)
		}
		vm := f.vm("web")
		if vm.Status.RestoreInProgress != "" || vm.Metadata.DeletionTimestamp != nil || !proto.Equal(vm.Spec, changedVM().Spec) {
			t.Fatalf("target %v", vm)
		}
	})
}

// A restore past its commit point with the spec not yet written: a fresh
// controller writes it and finishes.
func TestRestoreRollsForwardAfterRestart(t *testing.T) {
	vm := changedVM()
	vm.Status.RestoreInProgress = "rest"
	r := newRestore("web")
	r.Metadata.Finalizers = []string{apiv1.FinalizerRestore}
	r.Status = &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreCommitting, TargetUid: "vm-uid", NodeName: "n1",
		Staged: true, Swapped: true}
	f := newFixture(t, r, nil, vm)
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreSucceeded || !st.SpecRestored {
		t.Fatalf("status %v", st)
	}
	got := f.vm("web")
	if got.Spec.Template.Spec.Domain.Memory.Guest != "128Mi" || got.Spec.RunStrategy != apiv1.RunStrategyManual ||
		got.Status.RestoreInProgress != "" {
		t.Fatalf("target %v", got)
	}
}

// Deleting a restore: before the commit point it is undone; in
// Committing it finishes first.
func TestRestoreDeletion(t *testing.T) {
	t.Run("staging", func(t *testing.T) {
		f := newFixture(t, newRestore("web"), nil, changedVM())
		f.settle(t)
		f.restores.Update(t, "default", "rest", func(r *apiv1.VirtualMachineRestore) { r.Metadata.DeletionTimestamp = r.Metadata.CreationTimestamp })
		f.settle(t)
		r := f.restore(t) // the node's finalizer still holds it
		if slices.Contains(r.Metadata.Finalizers, apiv1.FinalizerRestore) || f.vm("web").Status.RestoreInProgress != "" {
			t.Fatalf("restore %v, target %v", r, f.vm("web").Status)
		}
		// Its node deleted: nobody will drop that finalizer, so the
		// controller does, and the restore goes.
		f.goneNodes["n1"] = true
		if res := f.settle(t); res.RequeueAfter != 0 {
			t.Fatalf("requeue %v after the release", res.RequeueAfter)
		}
		if _, ok := f.restores.Informer.Get("default", "rest"); ok {
			t.Fatalf("restore of a deleted node kept: %v", f.restore(t).Metadata)
		}
	})
	t.Run("committing", func(t *testing.T) {
		f := newFixture(t, newRestore("web"), nil, changedVM())
		f.settle(t)
		f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Staged = true })
		f.settle(t)
		f.restores.Update(t, "default", "rest", func(r *apiv1.VirtualMachineRestore) { r.Metadata.DeletionTimestamp = r.Metadata.CreationTimestamp })
		f.settle(t)
		if r := f.restore(t); !slices.Contains(r.Metadata.Finalizers, apiv1.FinalizerRestore) {
			t.Fatal("released before rolling forward")
		}
		f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Swapped = true })
		f.settle(t)
		r := f.restore(t)
		if r.Status.Phase != apiv1.RestoreSucceeded || slices.Contains(r.Metadata.Finalizers, apiv1.FinalizerRestore) {
			t.Fatalf("restore %v", r)
		}
		if f.vm("web").Status.RestoreInProgress != "" {
			t.Fatal("left locked")
		}
	})
}

// The target deleted mid-way fails the restore, before or after the
// commit point.
func TestRestoreTargetDeleted(t *testing.T) {
	f := newFixture(t, newRestore("web"), nil, changedVM())
	f.settle(t)
	f.node(t, func(st *apiv1.VirtualMachineRestoreStatus) { st.Staged = true })
	f.settle(t)
	f.vms.Update(t, "default", "web", func(vm *apiv1.VirtualMachine) { vm.Metadata.Finalizers = nil })
	if _, _, err := f.vms.Store.Delete(t.Context(), "default", "web", storeDeleteAll); err != nil {
		t.Fatal(err)
	}
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreFailed || !strings.Contains(st.Error, "was deleted after the restore's commit point") {
		t.Fatalf("status %v", st)
	}
}

// A target the restore made that the VM cache has not seen yet (it
// follows the store a moment late) is not taken for deleted: the store
// decides.
func TestRestoreTargetNotInTheCacheYet(t *testing.T) {
	f := newFixture(t, newRestore("copy"), nil, sourceVM())
	f.settle(t)
	if st := f.restore(t).Status; st.Phase != apiv1.RestoreStaging || st.TargetUid == "" {
		t.Fatalf("status %v", st)
	}
	// The cache without the target, the store with it.
	f.vms.Informer.Fill(f.vm("web"))
	if _, ok := f.c.vms.Get("default", "copy"); ok {
		t.Fatal("the cache still has the target: the test proves nothing")
	}
	f.restores.Sync(t)
	if _, err := f.c.Reconcile(t.Context(), restoreKey); err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	f.restores.Sync(t)
	if st := f.restore(t).Status; st.Phase == apiv1.RestoreFailed {
		t.Fatalf("failed for a target only the cache lacks: %v", st)
	}
}
