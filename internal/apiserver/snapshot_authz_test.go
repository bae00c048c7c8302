package apiserver

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// nodeContent stores a content of node with its data finalizer, as the
// snapshot controller makes it.
func (e *secEnv) nodeContent(name, node string) *apiv1.VirtualMachineSnapshotContent {
	e.t.Helper()
	c, err := e.st.SnapshotContents.Create(ctx(), &apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{apiv1.LabelNodeName: node},
			Finalizers: []string{apiv1.FinalizerSnapshotData}},
		Spec: &apiv1.VirtualMachineSnapshotContentSpec{SnapshotName: "s", NodeName: node},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// A node sees and writes the snapshot contents and restores of its own
// node, nothing else; from it a status write may drop the data
// finalizer and nothing more of the metadata.
func TestNodeSnapshotContentsAndRestoresAreItsOwn(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a, b := e.join("node-a"), e.join("node-b")
	e.nodeContent("ca", "node-a")
	restore, err := e.st.Restores.Create(ctx(), &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "ra", Labels: map[string]string{apiv1.LabelNodeName: "node-a"},
			Finalizers: []string{apiv1.FinalizerRestoreData, apiv1.FinalizerRestore}},
		Spec: &apiv1.VirtualMachineRestoreSpec{Target: "web", Snapshot: "s"},
	})
	if err != nil {
		t.Fatal(err)
	}

	// Lists and watches: only with the node's own selector.
	_, err = b.c.SnapshotContents.List(ctx(), &apiv1.ListSnapshotContentsRequest{})
	wantCode(t, "node-b listing every content", err, codes.PermissionDenied)
	_, err = b.c.SnapshotContents.List(ctx(), &apiv1.ListSnapshotContentsRequest{Options: &apiv1.ListOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}})
	wantCode(t, "node-b listing node-a's contents", err, codes.PermissionDenied)
	_, err = b.c.Restores.List(ctx(), &apiv1.ListRestoresRequest{Options: &apiv1.ListOptions{LabelSelector: apiv1.LabelMigrationTargetNode + "=node-b"}})
	wantCode(t, "node-b listing restores by the migration label", err, codes.PermissionDenied)
	own := &apiv1.ListOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}
	if l, err := a.c.SnapshotContents.List(ctx(), &apiv1.ListSnapshotContentsRequest{Options: own}); err != nil || len(l.Items) != 1 {
		t.Fatalf("node-a listing its contents: %v %v", l, err)
	}
	if l, err := a.c.Restores.List(ctx(), &apiv1.ListRestoresRequest{Options: own}); err != nil || len(l.Items) != 1 {
		t.Fatalf("node-a listing its restores: %v %v", l, err)
	}
	cw, err := b.c.SnapshotContents.Watch(ctx(), &apiv1.WatchSnapshotContentsRequest{Options: &apiv1.WatchOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}})
	if err == nil {
		_, err = cw.Recv()
	}
	wantCode(t, "node-b watching node-a's contents", err, codes.PermissionDenied)
	rw, err := b.c.Restores.Watch(ctx(), &apiv1.WatchRestoresRequest{Options: &apiv1.WatchOptions{}})
	if err == nil {
		_, err = rw.Recv()
	}
	wantCode(t, "node-b watching every restore", err, codes.PermissionDenied)
	aw, err := a.c.Restores.Watch(ctx(), &apiv1.WatchRestoresRequest{Options: &apiv1.WatchOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}})
	if err != nil {
		t.Fatal(err)
	}
	if ev, err := aw.Recv(); err != nil || ev.Type != apiv1.EventType_ADDED || ev.Object.Metadata.Name != "ra" {
		t.Fatalf("node-a watching its restores: %v %v", ev, err)
	}

	// Gets: only objects labelled with the node.
	_, err = b.c.SnapshotContents.Get(ctx(), &apiv1.GetSnapshotContentRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "ca"}})
	wantCode(t, "node-b reading node-a's content", err, codes.PermissionDenied)
	_, err = b.c.Restores.Get(ctx(), &apiv1.GetRestoreRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "ra"}})
	wantCode(t, "node-b reading node-a's restore", err, codes.PermissionDenied)
	c, err := a.c.SnapshotContents.Get(ctx(), &apiv1.GetSnapshotContentRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "ca"}})
	if err != nil {
		t.Fatal(err)
	}

	// Status writes: refused for another node's object.
	c.Status = &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotFailed, Error: "forged"}
	_, err = b.c.SnapshotContents.UpdateStatus(ctx(), &apiv1.UpdateSnapshotContentStatusRequest{Content: c})
	wantCode(t, "node-b failing node-a's content", err, codes.PermissionDenied)
	r := proto.Clone(restore).(*apiv1.VirtualMachineRestore)
	r.Status = &apiv1.VirtualMachineRestoreStatus{Staged: true}
	_, err = b.c.Restores.UpdateStatus(ctx(), &apiv1.UpdateRestoreStatusRequest{Restore: r})
	wantCode(t, "node-b staging node-a's restore", err, codes.PermissionDenied)

	// The owner's write: the status, and the data finalizer's removal;
	// a relabelling to another node and other finalizer changes are
	// ignored.
	c.Status = &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotInProgress, Message: "copying volume data (1/2)"}
	c.Metadata.Labels = map[string]string{apiv1.LabelNodeName: "node-b"}
	out, err := a.c.SnapshotContents.UpdateStatus(ctx(), &apiv1.UpdateSnapshotContentStatusRequest{Content: c})
	if err != nil || out.Metadata.Labels[apiv1.LabelNodeName] != "node-a" || out.Status.Message != c.Status.Message ||
		len(out.Metadata.Finalizers) != 1 {
		t.Fatalf("node-a's status write: %v %v", out, err)
	}
	// Of a restore's status the node writes only its own part: what the
	// controller decides (phase, completion, the spec write) stays.
	r.Status = &apiv1.VirtualMachineRestoreStatus{Staged: true, Message: "1 volume staged",
		Phase: apiv1.RestoreSucceeded, Complete: true, SpecRestored: true}
	r.Metadata.Finalizers = nil // the controller's finalizer stays
	out2, err := a.c.Restores.UpdateStatus(ctx(), &apiv1.UpdateRestoreStatusRequest{Restore: r})
	if err != nil || !out2.Status.Staged || len(out2.Metadata.Finalizers) != 1 || out2.Metadata.Finalizers[0] != apiv1.FinalizerRestore {
		t.Fatalf("node-a's restore write: %v %v", out2, err)
	}
	if st := out2.Status; st.Message != "1 volume staged" || st.Phase != "" || st.Complete || st.SpecRestored {
		t.Fatalf("node-a's restore write took fields of the controller's: %v", st)
	}

	// Deleting is the admin's; once deleting, the node's removal of the
	// data finalizer removes the content.
	_, err = a.c.SnapshotContents.Delete(ctx(), &apiv1.DeleteSnapshotContentRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "ca"}})
	wantCode(t, "a node deleting a content", err, codes.PermissionDenied)
	del, err := e.admin().SnapshotContents.Delete(ctx(), &apiv1.DeleteSnapshotContentRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "ca"}})
	if err != nil || del.Metadata.DeletionTimestamp == nil {
		t.Fatalf("admin delete: %v %v", del, err)
	}
	del.Metadata.Finalizers = nil
	if _, err := a.c.SnapshotContents.UpdateStatus(ctx(), &apiv1.UpdateSnapshotContentStatusRequest{Content: del}); err != nil {
		t.Fatal(err)
	}
	_, err = e.admin().SnapshotContents.Get(ctx(), &apiv1.GetSnapshotContentRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "ca"}})
	wantCode(t, "content after its data finalizer went", err, codes.NotFound)

	// Everything else of the snapshot kinds is the admin's.
	_, err = a.c.Snapshots.List(ctx(), &apiv1.ListSnapshotsRequest{})
	wantCode(t, "a node listing snapshots", err, codes.PermissionDenied)
	_, err = a.c.Restores.Create(ctx(), &apiv1.CreateRestoreRequest{Restore: &apiv1.VirtualMachineRestore{}})
	wantCode(t, "a node creating a restore", err, codes.PermissionDenied)
	_, err = a.c.Clones.Get(ctx(), &apiv1.GetCloneRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "x"}})
	wantCode(t, "a node reading a clone", err, codes.PermissionDenied)
	_, err = a.c.Snapshots.UpdateStatus(ctx(), &apiv1.UpdateSnapshotStatusRequest{Snapshot: &apiv1.VirtualMachineSnapshot{}})
	wantCode(t, "a node writing a snapshot's status", err, codes.PermissionDenied)
}

// FuzzNodeNameSelector: a selector a node may list contents or restores
// with never selects one of another node, nor one of no node, and the
// migration target label does not count.
func FuzzNodeNameSelector(f *testing.F) {
	for _, s := range []string{
		apiv1.LabelNodeName + "=node-a",
		apiv1.LabelNodeName + " in (node-a)",
		apiv1.LabelNodeName + " in (node-a,node-b)",
		apiv1.LabelMigrationTargetNode + "=node-a",
		apiv1.LabelNodeName + "!=node-b",
		"",
	} {
		f.Add(s, "node-b")
	}
	f.Fuzz(func(t *testing.T, selector, other string) {
		if nodeNameSelector("node-a", selector) != nil {
			return
		}
		sel, err := labels.Parse(selector)
		if err != nil {
			t.Fatalf("accepted a selector that does not parse: %q", selector)
		}
		if other != "node-a" && sel.Matches(labels.Set{apiv1.LabelNodeName: other, apiv1.LabelMigrationTargetNode: "node-a"}) {
			t.Fatalf("selector %q, accepted for node-a, selects an object of %q", selector, other)
		}
		if sel.Matches(labels.Set{"app": "web"}) {
			t.Fatalf("selector %q, accepted for node-a, selects an object of no node", selector)
		}
	})
}
