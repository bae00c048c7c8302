package apiserver

import (
	"context"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func (f *fixture) snapshots() apiv1.SnapshotsClient { return apiv1.NewSnapshotsClient(f.conn) }
func (f *fixture) contents() apiv1.SnapshotContentsClient {
	return apiv1.NewSnapshotContentsClient(f.conn)
}
func (f *fixture) restores() apiv1.RestoresClient { return apiv1.NewRestoresClient(f.conn) }
func (f *fixture) clones() apiv1.ClonesClient     { return apiv1.NewClonesClient(f.conn) }

func key(name string) *apiv1.ObjectKey { return &apiv1.ObjectKey{Name: name} }

func snapshotOf(name, vm string) *apiv1.VirtualMachineSnapshot {
	return &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.VirtualMachineSnapshotSpec{Source: vm}}
}

// storeContent stores a content as the snapshot controller makes it: on
// node, with the node's data finalizer (and more finalizers if given).
func (f *fixture) storeContent(t *testing.T, name, node string, finalizers ...string) *apiv1.VirtualMachineSnapshotContent {
	t.Helper()
	c, err := f.st.SnapshotContents.Create(context.Background(), &apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{apiv1.LabelNodeName: node},
			Finalizers: append([]string{apiv1.FinalizerSnapshotData}, finalizers...)},
		Spec: &apiv1.VirtualMachineSnapshotContentSpec{SnapshotName: "s", NodeName: node, Volumes: []string{"data"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSnapshotCreateGetListWatchDelete(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	in := snapshotOf("s1", "web")
	in.Metadata.Uid = "client-chosen"
	in.Metadata.Finalizers = []string{apiv1.FinalizerSnapshot}
	in.Status = &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true}
	out, err := f.snapshots().Create(ctx, &apiv1.CreateSnapshotRequest{Snapshot: in})
	if err != nil {
		t.Fatal(err)
	}
	m := out.Metadata
	if m.Namespace != "default" || m.Uid == "client-chosen" || len(m.Finalizers) != 0 || out.Status.GetPhase() != "" || out.Status.GetReadyToUse() {
		t.Fatalf("server fields not the server's: %v", out)
	}
	if out.Spec.DeletionPolicy != apiv1.DeletionPolicyDelete || out.Spec.FailureDeadlineSeconds != nil {
		t.Fatalf("spec not defaulted as documented: %v", out.Spec)
	}
	if _, err := f.snapshots().Create(ctx, &apiv1.CreateSnapshotRequest{Snapshot: snapshotOf("s1", "web")}); code(err) != codes.AlreadyExists {
		t.Fatalf("duplicate: %v", err)
	}
	bad := snapshotOf("s2", "")
	bad.Spec.DeletionPolicy = "Keep"
	_, err = f.snapshots().Create(ctx, &apiv1.CreateSnapshotRequest{Snapshot: bad})
	if v := violations(err); code(err) != codes.InvalidArgument || !v["spec.source"] || !v["spec.deletion_policy"] {
		t.Fatalf("invalid create: %v", err)
	}

	got, err := f.snapshots().Get(ctx, &apiv1.GetSnapshotRequest{Key: key("s1")})
	if err != nil || !proto.Equal(got, out) {
		t.Fatalf("get: %v %v", got, err)
	}
	w, err := f.snapshots().Watch(ctx, &apiv1.WatchSnapshotsRequest{Options: &apiv1.WatchOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []apiv1.EventType{apiv1.EventType_ADDED, apiv1.EventType_SYNCED} {
		if ev, err := w.Recv(); err != nil || ev.Type != want {
			t.Fatalf("want %v, got %v %v", want, ev, err)
		}
	}
	// The controller's status write.
	upd := proto.Clone(got).(*apiv1.VirtualMachineSnapshot)
	upd.Status = &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotInProgress}
	upd.Spec.Source = "other" // ignored: only the status is taken
	st, err := f.snapshots().UpdateStatus(ctx, &apiv1.UpdateSnapshotStatusRequest{Snapshot: upd})
	if err != nil || st.Status.Phase != apiv1.SnapshotInProgress || st.Spec.Source != "web" {
		t.Fatalf("update status: %v %v", st, err)
	}
	if ev, err := w.Recv(); err != nil || ev.Type != apiv1.EventType_MODIFIED || ev.Object.Status.GetPhase() != apiv1.SnapshotInProgress {
		t.Fatalf("after status: %v %v", ev, err)
	}
	if _, err := f.snapshots().UpdateStatus(ctx, &apiv1.UpdateSnapshotStatusRequest{Snapshot: upd}); code(err) != codes.Aborted {
		t.Fatalf("stale status write: %v", err)
	}
	upd = proto.Clone(st).(*apiv1.VirtualMachineSnapshot)
	upd.Status.Phase = "Done"
	if _, err := f.snapshots().UpdateStatus(ctx, &apiv1.UpdateSnapshotStatusRequest{Snapshot: upd}); code(err) != codes.InvalidArgument {
		t.Fatalf("unknown phase: %v", err)
	}
	upd.Metadata.ResourceVersion = 0
	if _, err := f.snapshots().UpdateStatus(ctx, &apiv1.UpdateSnapshotStatusRequest{Snapshot: upd}); code(err) != codes.InvalidArgument {
		t.Fatalf("versionless status write: %v", err)
	}
	if _, err := f.snapshots().UpdateStatus(ctx, &apiv1.UpdateSnapshotStatusRequest{}); code(err) != codes.InvalidArgument {
		t.Fatalf("status write of no object: %v", err)
	}

	if _, err := f.snapshots().Create(ctx, &apiv1.CreateSnapshotRequest{Snapshot: snapshotOf("s3", "db")}); err != nil {
		t.Fatal(err)
	}
	list, err := f.snapshots().List(ctx, &apiv1.ListSnapshotsRequest{})
	if err != nil || len(list.Items) != 2 || list.Items[0].Metadata.Name != "s1" || list.Items[1].Metadata.Name != "s3" {
		t.Fatalf("list: %v %v", list, err)
	}

	// Delete honours the controller's finalizer.
	if _, err := f.st.Snapshots.GuaranteedUpdate(ctx, "default", "s1", func(s *apiv1.VirtualMachineSnapshot) (*apiv1.VirtualMachineSnapshot, error) {
		s.Metadata.Finalizers = []string{apiv1.FinalizerSnapshot}
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	del, err := f.snapshots().Delete(ctx, &apiv1.DeleteSnapshotRequest{Key: key("s1")})
	if err != nil || del.Metadata.DeletionTimestamp == nil {
		t.Fatalf("delete with finalizer: %v %v", del, err)
	}
	if _, err := f.snapshots().Get(ctx, &apiv1.GetSnapshotRequest{Key: key("s1")}); err != nil {
		t.Fatalf("a snapshot with a finalizer went at once: %v", err)
	}
	if _, err := f.snapshots().Delete(ctx, &apiv1.DeleteSnapshotRequest{Key: key("s3")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.snapshots().Get(ctx, &apiv1.GetSnapshotRequest{Key: key("s3")}); code(err) != codes.NotFound {
		t.Fatalf("deleted snapshot: %v", err)
	}
}

func TestSnapshotContentStatusAndDataFinalizer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	c := f.storeContent(t, "c1", "node-a", "example.com/other")
	list, err := f.contents().List(ctx, &apiv1.ListSnapshotContentsRequest{Options: &apiv1.ListOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}

	// A status write: metadata changes other than the data finalizer are
	// ignored, the status is taken.
	upd := proto.Clone(c).(*apiv1.VirtualMachineSnapshotContent)
	upd.Metadata.Labels = map[string]string{apiv1.LabelNodeName: "node-b"}
	upd.Metadata.Annotations = map[string]string{"x": "y"}
	upd.Spec.Abandoned = true
	upd.Status = &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true,
		VolumeBackups: []*apiv1.VolumeBackup{{VolumeName: "data", Path: "/var/lib/virtplane/snapshots/x/data.qcow2", SizeBytes: 10}}}
	out, err := f.contents().UpdateStatus(ctx, &apiv1.UpdateSnapshotContentStatusRequest{Content: upd})
	if err != nil {
		t.Fatal(err)
	}
	if out.Metadata.Labels[apiv1.LabelNodeName] != "node-a" || len(out.Metadata.Annotations) != 0 || out.Spec.Abandoned ||
		!proto.Equal(out.Status, upd.Status) || len(out.Metadata.Finalizers) != 2 {
		t.Fatalf("status write took more than the status: %v", out)
	}
	// A path the node cannot have written.
	bad := proto.Clone(out).(*apiv1.VirtualMachineSnapshotContent)
	bad.Status.VolumeBackups[0].Path = "../../etc/shadow"
	if _, err := f.contents().UpdateStatus(ctx, &apiv1.UpdateSnapshotContentStatusRequest{Content: bad}); code(err) != codes.InvalidArgument {
		t.Fatalf("relative backup path: %v", err)
	}

	// Deleting: the finalizers hold it; dropping the data finalizer leaves
	// the other one, and the object.
	del, err := f.contents().Delete(ctx, &apiv1.DeleteSnapshotContentRequest{Key: key("c1")})
	if err != nil || del.Metadata.DeletionTimestamp == nil {
		t.Fatalf("delete: %v %v", del, err)
	}
	upd = proto.Clone(del).(*apiv1.VirtualMachineSnapshotContent)
	upd.Metadata.Finalizers = nil // lacks both: only the data finalizer may go
	out, err = f.contents().UpdateStatus(ctx, &apiv1.UpdateSnapshotContentStatusRequest{Content: upd})
	if err != nil || !slices.Equal(out.Metadata.Finalizers, []string{"example.com/other"}) {
		t.Fatalf("finalizer removal: %v %v", out, err)
	}
	// The other finalizer's owner lets go; then the data finalizer was the
	// last, and removing it removes the object.
	if _, err := f.st.SnapshotContents.GuaranteedUpdate(ctx, "default", "c1", func(c *apiv1.VirtualMachineSnapshotContent) (*apiv1.VirtualMachineSnapshotContent, error) {
		c.Metadata.Finalizers = []string{apiv1.FinalizerSnapshotData}
		return c, nil
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := f.contents().Get(ctx, &apiv1.GetSnapshotContentRequest{Key: key("c1")})
	if err != nil {
		t.Fatal(err)
	}
	cur.Metadata.Finalizers = []string{"example.com/other"} // not a way to add one
	if _, err := f.contents().UpdateStatus(ctx, &apiv1.UpdateSnapshotContentStatusRequest{Content: cur}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.contents().Get(ctx, &apiv1.GetSnapshotContentRequest{Key: key("c1")}); code(err) != codes.NotFound {
		t.Fatalf("a deleting content without finalizers is still there: %v", err)
	}
}

func TestRestoreAdmission(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	restore := func(name, target string) *apiv1.VirtualMachineRestore {
		return &apiv1.VirtualMachineRestore{Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.VirtualMachineRestoreSpec{Target: target, Snapshot: "s"}}
	}
	first, err := f.restores().Create(ctx, &apiv1.CreateRestoreRequest{Restore: restore("r1", "web")})
	if err != nil {
		t.Fatal(err)
	}
	if first.Spec.TargetReadinessPolicy != apiv1.ReadinessWaitGracePeriod || first.Status.GetPhase() != "" {
		t.Fatalf("created: %v", first)
	}
	_, err = f.restores().Create(ctx, &apiv1.CreateRestoreRequest{Restore: restore("r2", "web")})
	if code(err) != codes.FailedPrecondition || status.Convert(err).Message() != `VirtualMachineRestore "r1" in progress` {
		t.Fatalf("second restore of web: %v", err)
	}
	// The same name again is the name taken, not a restore in progress.
	if _, err = f.restores().Create(ctx, &apiv1.CreateRestoreRequest{Restore: restore("r1", "web")}); code(err) != codes.AlreadyExists {
		t.Fatalf("restore r1 created twice: %v", err)
	}
	// Another target is another matter.
	if _, err := f.restores().Create(ctx, &apiv1.CreateRestoreRequest{Restore: restore("r3", "db")}); err != nil {
		t.Fatal(err)
	}
	// Failed: no longer in progress.
	setStatus := func(name string, st *apiv1.VirtualMachineRestoreStatus) {
		cur, err := f.restores().Get(ctx, &apiv1.GetRestoreRequest{Key: key(name)})
		if err != nil {
			t.Fatal(err)
		}
		cur.Status = st
		if _, err := f.restores().UpdateStatus(ctx, &apiv1.UpdateRestoreStatusRequest{Restore: cur}); err != nil {
			t.Fatal(err)
		}
	}
	setStatus("r1", &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreFailed, Error: "snapshot not ready"})
	if _, err := f.restores().Create(ctx, &apiv1.CreateRestoreRequest{Restore: restore("r2", "web")}); err != nil {
		t.Fatalf("after the first failed: %v", err)
	}
	setStatus("r2", &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreSucceeded, Complete: true})
	if _, err := f.restores().Create(ctx, &apiv1.CreateRestoreRequest{Restore: restore("r4", "web")}); err != nil {
		t.Fatalf("after the second completed: %v", err)
	}
	// Invalid input is InvalidArgument, naming the fields.
	bad := restore("r5", "")
	bad.Spec.MacAddresses = map[string]string{"default": "02:00:00:00:00:01"}
	_, err = f.restores().Create(ctx, &apiv1.CreateRestoreRequest{Restore: bad})
	if v := violations(err); code(err) != codes.InvalidArgument || !v["spec.target"] || !v["spec.mac_addresses"] {
		t.Fatalf("invalid restore: %v", err)
	}
	list, err := f.restores().List(ctx, &apiv1.ListRestoresRequest{})
	if err != nil || len(list.Items) != 4 {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := f.restores().Delete(ctx, &apiv1.DeleteRestoreRequest{Key: key("r4")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.restores().Get(ctx, &apiv1.GetRestoreRequest{Key: key("r4")}); code(err) != codes.NotFound {
		t.Fatalf("deleted restore: %v", err)
	}
}

func TestRestoreDataFinalizer(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	r, err := f.st.Restores.Create(ctx, &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "r", Labels: map[string]string{apiv1.LabelNodeName: "node-a"},
			Finalizers: []string{apiv1.FinalizerRestoreData}},
		Spec: &apiv1.VirtualMachineRestoreSpec{Target: "web", Snapshot: "s"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.restores().Delete(ctx, &apiv1.DeleteRestoreRequest{Key: key("r")}); err != nil {
		t.Fatal(err)
	}
	cur, err := f.restores().Get(ctx, &apiv1.GetRestoreRequest{Key: key("r")})
	if err != nil || cur.Metadata.DeletionTimestamp == nil {
		t.Fatalf("deleting restore: %v %v", cur, err)
	}
	// Another finalizer in the request than the data one: dropping the
	// data finalizer is what counts, adding one is ignored.
	cur.Metadata.Finalizers = []string{apiv1.FinalizerRestore}
	cur.Status = &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreFailed}
	if _, err := f.restores().UpdateStatus(ctx, &apiv1.UpdateRestoreStatusRequest{Restore: cur}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.restores().Get(ctx, &apiv1.GetRestoreRequest{Key: key("r")}); code(err) != codes.NotFound {
		t.Fatalf("restore %v still there after its last finalizer went: %v", r.Metadata.Name, err)
	}
}

func TestCloneCreateRefusesExistingTarget(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web-2")}); err != nil {
		t.Fatal(err)
	}
	clone := func(name, target string) *apiv1.VirtualMachineClone {
		return &apiv1.VirtualMachineClone{Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.VirtualMachineCloneSpec{SourceName: "web", Target: target}}
	}
	_, err := f.clones().Create(ctx, &apiv1.CreateCloneRequest{Clone: clone("c1", "web-2")})
	if code(err) != codes.FailedPrecondition || status.Convert(err).Message() != `target VM "web-2" already exists` {
		t.Fatalf("clone onto an existing VM: %v", err)
	}
	out, err := f.clones().Create(ctx, &apiv1.CreateCloneRequest{Clone: clone("c1", "web-3")})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.SourceKind != apiv1.CloneSourceVM || out.Status.GetPhase() != "" {
		t.Fatalf("created: %v", out)
	}
	_, err = f.clones().Create(ctx, &apiv1.CreateCloneRequest{Clone: clone("c2", "web")})
	if v := violations(err); code(err) != codes.InvalidArgument || !v["spec.target"] {
		t.Fatalf("clone onto its source: %v", err)
	}
	out.Status = &apiv1.VirtualMachineCloneStatus{Phase: apiv1.CloneSnapshotInProgress, SnapshotName: apiv1.CloneSnapshotName(out.Metadata.Uid)}
	st, err := f.clones().UpdateStatus(ctx, &apiv1.UpdateCloneStatusRequest{Clone: out})
	if err != nil || st.Status.SnapshotName != out.Status.SnapshotName {
		t.Fatalf("status: %v %v", st, err)
	}
	list, err := f.clones().List(ctx, &apiv1.ListClonesRequest{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	if _, err := f.clones().Delete(ctx, &apiv1.DeleteCloneRequest{Key: key("c1")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.clones().Get(ctx, &apiv1.GetCloneRequest{Key: key("c1")}); code(err) != codes.NotFound {
		t.Fatalf("deleted clone: %v", err)
	}
}
