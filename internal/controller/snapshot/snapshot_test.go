package snapshot

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// A running VM's snapshot: finalizer, phase and deadline, the VM locked,
// a content for the instance's node holding the VM and its persistent
// volumes; the node's outcome copied back and the VM unlocked.
func TestSnapshotOfRunningVM(t *testing.T) {
	f := newFixture(t, newSnapshot(), newVM("n1"), newVMI("n2"))
	res := f.settle(t)

	s := f.snap(t)
	if !slices.Contains(s.Metadata.Finalizers, apiv1.FinalizerSnapshot) || s.Status.Phase != apiv1.SnapshotInProgress {
		t.Fatalf("snapshot %v", s)
	}
	if dl := s.Status.FailureDeadline.AsTime(); !dl.Equal(t0.Add(300 * time.Second)) {
		t.Fatalf("deadline %v", dl)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 300*time.Second {
		t.Fatalf("requeue %v: want at the deadline at the latest", res.RequeueAfter)
	}
	if s.Status.SourceUid != "vm-uid" || s.Status.ContentName != apiv1.SnapshotContentName("snap-uid") {
		t.Fatalf("status %v", s.Status)
	}
	if p := progressing(s); p.GetStatus() != apiv1.ConditionTrue {
		t.Fatalf("progressing %v", p)
	}
	if got := f.vm(t).Status.SnapshotInProgress; got != "snap" {
		t.Fatalf("VM lock %q", got)
	}
	ct := f.content(t)
	if ct == nil {
		t.Fatal("no content")
	}
	if ct.Spec.NodeName != "n2" || ct.Metadata.Labels[apiv1.LabelNodeName] != "n2" ||
		!slices.Equal(ct.Metadata.Finalizers, []string{apiv1.FinalizerSnapshotData}) ||
		!slices.Equal(ct.Spec.Volumes, []string{"data"}) || ct.Spec.SnapshotUid != "snap-uid" || ct.Spec.SnapshotName != "snap" {
		t.Fatalf("content %v", ct)
	}
	src := ct.Spec.Source
	if src.Metadata.Uid != "vm-uid" || src.Metadata.Name != "web" || src.Metadata.Labels["app"] != "web" ||
		src.Metadata.Annotations["team"] != "blue" || !proto.Equal(src.Spec, newVM("").Spec) || src.Status != nil ||
		len(src.Metadata.Finalizers) != 0 {
		t.Fatalf("content source %v", src)
	}
	if ct.Status.GetPhase() != "" {
		t.Fatalf("content status %v: the node's to fill", ct.Status)
	}

	f.nodeDone(t, succeeded("data"))
	f.settle(t)
	s = f.snap(t)
	if s.Status.Phase != apiv1.SnapshotSucceeded || !s.Status.ReadyToUse || !s.Status.CreationTime.AsTime().Equal(t0.Add(time.Second)) ||
		s.Status.NodeName != "n2" || !slices.Equal(s.Status.IncludedVolumes, []string{"data"}) ||
		!slices.Equal(s.Status.ExcludedVolumes, []string{"root", "seed"}) ||
		!slices.Equal(s.Status.Indications, []string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent}) {
		t.Fatalf("status %v", s.Status)
	}
	if !apiv1.IsConditionTrue(s.Status.Conditions, apiv1.ConditionReady) || progressing(s).GetStatus() != apiv1.ConditionFalse {
		t.Fatalf("conditions %v", s.Status.Conditions)
	}
	if got := f.vm(t).Status.SnapshotInProgress; got != "" {
		t.Fatalf("VM still locked by %q", got)
	}
}

// A VM that never ran, or has no persistent volume, gets a content that
// is done at once, with no node to wait for.
func TestSnapshotWithoutNodeWork(t *testing.T) {
	noPersistent := newVM("n1")
	noPersistent.Spec.Template.Spec.Volumes = noPersistent.Spec.Template.Spec.Volumes[:1]
	for name, vm := range map[string]*apiv1.VirtualMachine{"never ran": newVM(""), "no persistent volume": noPersistent} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, newSnapshot(), vm, nil)
			f.settle(t)
			ct := f.content(t)
			if ct == nil || ct.Status.GetPhase() != apiv1.SnapshotSucceeded || !ct.Status.ReadyToUse || ct.Status.CreationTime == nil ||
				len(ct.Metadata.Labels) != 0 || len(ct.Metadata.Finalizers) != 0 {
				t.Fatalf("content %v", ct)
			}
			s := f.snap(t)
			if s.Status.Phase != apiv1.SnapshotSucceeded || !s.Status.ReadyToUse || len(s.Status.IncludedVolumes) != 0 ||
				len(s.Status.ExcludedVolumes) != len(vm.Spec.Template.Spec.Volumes) {
				t.Fatalf("status %v", s.Status)
			}
			if f.vm(t).Status.SnapshotInProgress != "" {
				t.Fatal("VM left locked")
			}
		})
	}
}

// The lock waits while another snapshot or a restore holds the VM, or its
// instance migrates; then it is taken.
func TestSnapshotWaitsForLock(t *testing.T) {
	migrating := newVMI("n1")
	migrating.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "m", SourceNode: "n1", TargetNode: "n2"}
	for _, tc := range []struct {
		name   string
		mutate func(*apiv1.VirtualMachine)
		vmi    *apiv1.VirtualMachineInstance
		why    string
	}{
		{"other snapshot", func(vm *apiv1.VirtualMachine) { vm.Status.SnapshotInProgress = "other" }, nil, `snapshot "other" in progress`},
		{"restore", func(vm *apiv1.VirtualMachine) { vm.Status.RestoreInProgress = "r" }, nil, `restore "r" in progress`},
		{"migrating", func(*apiv1.VirtualMachine) {}, migrating, "VMI is migrating"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := newVM("n1")
			tc.mutate(vm)
			f := newFixture(t, newSnapshot(), vm, tc.vmi)
			res := f.settle(t)
			if res.RequeueAfter != lockRetry {
				t.Fatalf("requeue %v", res.RequeueAfter)
			}
			s := f.snap(t)
			p := progressing(s)
			if s.Status.Phase != apiv1.SnapshotInProgress || p.GetStatus() != apiv1.ConditionFalse || p.GetMessage() != "Source not locked: "+tc.why {
				t.Fatalf("status %v", s.Status)
			}
			if f.content(t) != nil {
				t.Fatal("content made while not locked")
			}
			f.vms.Update(t, "default", "web", func(vm *apiv1.VirtualMachine) {
				vm.Status.SnapshotInProgress, vm.Status.RestoreInProgress = "", ""
			})
			if tc.vmi != nil {
				f.vmis.Update(t, "default", "web", func(v *apiv1.VirtualMachineInstance) { v.Status.MigrationState.Completed = true })
			}
			f.settle(t)
			if f.vm(t).Status.SnapshotInProgress != "snap" || f.content(t) == nil {
				t.Fatal("not locked once free")
			}
		})
	}
}

// A missing source keeps the snapshot InProgress until the deadline
// fails it; the deadline is driven by the injected clock.
func TestSnapshotSourceMissingThenDeadline(t *testing.T) {
	f := newFixture(t, newSnapshot(), nil, nil)
	res := f.settle(t)
	s := f.snap(t)
	if s.Status.Phase != apiv1.SnapshotInProgress || progressing(s).GetMessage() != "Source does not exist" {
		t.Fatalf("status %v", s.Status)
	}
	if res.RequeueAfter != 300*time.Second {
		t.Fatalf("requeue %v, want the deadline", res.RequeueAfter)
	}
	f.now = t0.Add(301 * time.Second)
	f.settle(t)
	s = f.snap(t)
	if s.Status.Phase != apiv1.SnapshotFailed || s.Status.Error != msgDeadlineExceeded ||
		!apiv1.IsConditionTrue(s.Status.Conditions, apiv1.ConditionFailure) {
		t.Fatalf("status %v", s.Status)
	}
}

// A deadline of 0 is none: nothing fails however long it takes.
func TestSnapshotNoDeadline(t *testing.T) {
	snap := newSnapshot()
	zero := int64(0)
	snap.Spec.FailureDeadlineSeconds = &zero
	f := newFixture(t, snap, nil, nil)
	if res := f.settle(t); res.RequeueAfter != 0 {
		t.Fatalf("requeue %v", res.RequeueAfter)
	}
	f.now = t0.Add(1000 * time.Hour)
	f.settle(t)
	if s := f.snap(t); s.Status.Phase != apiv1.SnapshotInProgress || s.Status.FailureDeadline != nil {
		t.Fatalf("status %v", s.Status)
	}
}

// Past the deadline with the node still copying: the snapshot fails and
// the content is abandoned; the VM stays locked until the node has undone
// its work (written the content final), then it is unlocked. A fresh
// controller (a new leader) does the same from what the store holds.
func TestSnapshotDeadlineAbandonsContent(t *testing.T) {
	f := newFixture(t, newSnapshot(), newVM("n1"), nil)
	f.settle(t)
	if f.vm(t).Status.SnapshotInProgress != "snap" {
		t.Fatal("not locked")
	}
	f.now = t0.Add(300 * time.Second)
	f.restart(t)
	f.settle(t)
	s := f.snap(t)
	if s.Status.Phase != apiv1.SnapshotFailed || s.Status.Error != msgDeadlineExceeded {
		t.Fatalf("status %v", s.Status)
	}
	if !f.content(t).Spec.Abandoned {
		t.Fatal("content not abandoned")
	}
	if f.vm(t).Status.SnapshotInProgress != "snap" {
		t.Fatal("VM unlocked while the node may still merge an overlay back")
	}
	f.nodeDone(t, func(ct *apiv1.VirtualMachineSnapshotContent) {
		ct.Status = &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotFailed, Error: "abandoned"}
	})
	f.settle(t)
	if f.vm(t).Status.SnapshotInProgress != "" {
		t.Fatal("VM left locked after the node released the content")
	}
}

// The node's failure fails the snapshot and unlocks the VM.
func TestSnapshotContentFailed(t *testing.T) {
	f := newFixture(t, newSnapshot(), newVM("n1"), nil)
	f.settle(t)
	f.nodeDone(t, func(ct *apiv1.VirtualMachineSnapshotContent) {
		ct.Status = &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotFailed, Error: "qemu-img: disk full"}
	})
	f.settle(t)
	s := f.snap(t)
	if s.Status.Phase != apiv1.SnapshotFailed || !strings.Contains(s.Status.Error, "qemu-img: disk full") {
		t.Fatalf("status %v", s.Status)
	}
	if f.vm(t).Status.SnapshotInProgress != "" || f.content(t).Spec.Abandoned {
		t.Fatalf("VM %v content %v", f.vm(t).Status, f.content(t).Spec)
	}
}

// A crash after the lock and before the content: a fresh controller finds
// the VM locked by this snapshot and makes the content.
func TestSnapshotResumesAfterLock(t *testing.T) {
	vm := newVM("n1")
	vm.Status.SnapshotInProgress = "snap"
	snap := newSnapshot()
	snap.Metadata.Finalizers = []string{apiv1.FinalizerSnapshot}
	snap.Status = &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotInProgress}
	f := newFixture(t, snap, vm, nil)
	f.settle(t)
	if ct := f.content(t); ct == nil || ct.Spec.NodeName != "n1" {
		t.Fatalf("content %v", ct)
	}
}

// Deleting: phase Deleting, the VM unlocked, the content deleted (the
// node's finalizer holds it until the data is gone) and only then the
// snapshot released. Retain keeps a ready content.
func TestSnapshotDeletion(t *testing.T) {
	t.Run("Delete while in progress", func(t *testing.T) {
		f := newFixture(t, newSnapshot(), newVM("n1"), nil)
		f.settle(t)
		f.snaps.Update(t, "default", "snap", func(s *apiv1.VirtualMachineSnapshot) {
			s.Metadata.DeletionTimestamp = f.snap(t).Metadata.CreationTimestamp
		})
		f.settle(t)
		s := f.snap(t)
		if s.Status.Phase != apiv1.SnapshotDeleting || !slices.Contains(s.Metadata.Finalizers, apiv1.FinalizerSnapshot) {
			t.Fatalf("snapshot %v", s)
		}
		if f.vm(t).Status.SnapshotInProgress != "" {
			t.Fatal("VM left locked")
		}
		ct := f.content(t)
		if ct == nil || ct.Metadata.DeletionTimestamp == nil {
			t.Fatalf("content %v not being deleted", ct)
		}
		// The node drops the data, then its finalizer.
		f.nodeDone(t, func(ct *apiv1.VirtualMachineSnapshotContent) { ct.Metadata.Finalizers = nil })
		if f.content(t) != nil {
			t.Fatal("content still there")
		}
		f.settle(t)
		if _, ok := f.snaps.Informer.Get("default", "snap"); ok {
			t.Fatalf("snapshot not released: %v", f.snap(t))
		}
	})
	t.Run("the node was deleted", func(t *testing.T) {
		// Past its deadline with the node gone: failed, and the VM is
		// not held for an undo that will never come.
		f := newFixture(t, newSnapshot(), newVM("n1"), nil)
		f.settle(t)
		f.goneNodes["n1"] = true
		f.now = t0.Add(300 * time.Second)
		f.settle(t)
		if s := f.snap(t); s.Status.Phase != apiv1.SnapshotFailed || f.vm(t).Status.SnapshotInProgress != "" {
			t.Fatalf("snapshot %v, VM lock %q", s.Status, f.vm(t).Status.SnapshotInProgress)
		}
		// Deleting it drops the content's data finalizer for the node,
		// and both go.
		f.snaps.Update(t, "default", "snap", func(s *apiv1.VirtualMachineSnapshot) {
			s.Metadata.DeletionTimestamp = f.snap(t).Metadata.CreationTimestamp
		})
		f.settle(t)
		f.settle(t)
		if ct := f.content(t); ct != nil {
			t.Fatalf("content of a deleted node kept: %v", ct.Metadata)
		}
		if _, ok := f.snaps.Informer.Get("default", "snap"); ok {
			t.Fatalf("snapshot not released: %v", f.snap(t))
		}
	})
	t.Run("Retain keeps a ready content", func(t *testing.T) {
		snap := newSnapshot()
		snap.Spec.DeletionPolicy = apiv1.DeletionPolicyRetain
		f := newFixture(t, snap, newVM("n1"), nil)
		f.settle(t)
		f.nodeDone(t, succeeded("data"))
		f.settle(t)
		f.snaps.Update(t, "default", "snap", func(s *apiv1.VirtualMachineSnapshot) { s.Metadata.DeletionTimestamp = s.Metadata.CreationTimestamp })
		f.settle(t)
		if _, ok := f.snaps.Informer.Get("default", "snap"); ok {
			t.Fatal("snapshot not released")
		}
		if ct := f.content(t); ct == nil || ct.Metadata.DeletionTimestamp != nil {
			t.Fatalf("content %v not kept", ct)
		}
	})
	t.Run("Retain deletes a content not ready", func(t *testing.T) {
		snap := newSnapshot()
		snap.Spec.DeletionPolicy = apiv1.DeletionPolicyRetain
		f := newFixture(t, snap, newVM("n1"), nil)
		f.settle(t)
		f.snaps.Update(t, "default", "snap", func(s *apiv1.VirtualMachineSnapshot) { s.Metadata.DeletionTimestamp = s.Metadata.CreationTimestamp })
		f.settle(t)
		if ct := f.content(t); ct == nil || ct.Metadata.DeletionTimestamp == nil {
			t.Fatalf("content %v", ct)
		}
		if _, ok := f.snaps.Informer.Get("default", "snap"); !ok {
			t.Fatal("snapshot released before its content went")
		}
	})
}
