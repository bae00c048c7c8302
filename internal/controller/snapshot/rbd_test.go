package snapshot

import (
	"slices"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// withClass puts web's persistent volume on class (and adds a local one
// when local).
func withClass(vm *apiv1.VirtualMachine, class string, local bool) *apiv1.VirtualMachine {
	vols := vm.Spec.Template.Spec.Volumes
	vols[1].Persistent.StorageClass = class
	if local {
		vm.Spec.Template.Spec.Volumes = append(vols, &apiv1.Volume{Name: "logs", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}})
	}
	return vm
}

// Who takes a snapshot: the running instance's node (it freezes the
// guest), the node holding local or shared volumes, or, for a VM that
// does not run and has only rbd volumes, no node (the server's storage
// controller), whatever node it ran on last.
func TestContentTakerByVolumes(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vm       *apiv1.VirtualMachine
		vmi      *apiv1.VirtualMachineInstance
		wantNode string
		done     bool // done at once, with nothing to copy
	}{
		{"rbd, stopped", withClass(newVM("n1"), "ceph", false), nil, "", false},
		{"rbd, stopped, its node deleted", withClass(newVM("gone"), "ceph", false), nil, "", false},
		{"rbd, running", withClass(newVM("n1"), "ceph", false), newVMI("n2"), "n2", false},
		{"rbd and local, stopped", withClass(newVM("n1"), "ceph", true), nil, "n1", false},
		{"shared, stopped", withClass(newVM("n1"), "nfs", false), nil, "n1", false},
		{"a class that does not exist", withClass(newVM("n1"), "nope", false), nil, "", false},
		{"local, never ran", newVM(""), nil, "", true},
		{"rbd and local, never pinned", withClass(newVM(""), "ceph", true), nil, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, newSnapshot(), tc.vm, tc.vmi)
			f.goneNodes["gone"] = true
			f.settle(t)
			ct := f.content(t)
			if ct == nil {
				t.Fatal("no content")
			}
			label := ct.GetMetadata().GetLabels()[apiv1.LabelNodeName]
			data := slices.Contains(ct.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshotData)
			if ct.GetSpec().GetNodeName() != tc.wantNode || label != tc.wantNode || data != (tc.wantNode != "") {
				t.Errorf("node %q, label %q, data finalizer %v: want node %q", ct.GetSpec().GetNodeName(), label, data, tc.wantNode)
			}
			if done := ct.GetStatus().GetPhase() == apiv1.SnapshotSucceeded; done != tc.done {
				t.Errorf("content done at once: %v, want %v", done, tc.done)
			}
		})
	}
}

// The snapshot names a node only for copies on its disk: RBD snapshots
// and shared copies outlive every node.
func TestSnapshotNodeOnlyForCopiesOnItsDisk(t *testing.T) {
	f := newFixture(t, newSnapshot(), withClass(newVM("n1"), "ceph", false), newVMI("n1"))
	f.settle(t)
	f.nodeDone(t, func(ct *apiv1.VirtualMachineSnapshotContent) {
		succeeded()(ct)
		ct.Status.VolumeBackups = []*apiv1.VolumeBackup{{VolumeName: "data", StorageClass: "ceph", RbdSnapshot: "vp/i@s"}}
	})
	f.settle(t)
	st := f.snap(t).Status
	if st.Phase != apiv1.SnapshotSucceeded || st.NodeName != "" || !slices.Equal(st.IncludedVolumes, []string{"data"}) {
		t.Fatalf("status %v", st)
	}
}
