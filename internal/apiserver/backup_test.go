package apiserver

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const testS3Secret = "s3cr3t-Key/with+chars="

func s3Target(name string) *apiv1.BackupTarget {
	return &apiv1.BackupTarget{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.BackupTargetSpec{S3: &apiv1.S3BackupTarget{
			Endpoint: "http://169.254.7.254:7480", Bucket: "backups", Prefix: "cluster-a",
			AccessKey: "AKIAEXAMPLE", SecretKey: testS3Secret,
		}},
	}
}

func TestBackupTargetSecretIsNeverRead(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	bt := apiv1.NewBackupTargetsClient(f.conn)
	created, err := bt.Create(ctx, &apiv1.CreateBackupTargetRequest{BackupTarget: s3Target("s3")})
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, got *apiv1.BackupTarget) {
		t.Helper()
		if got.GetSpec().GetS3().GetSecretKey() != "" || strings.Contains(got.String(), testS3Secret) {
			t.Errorf("%s returns the secret key: %v", what, got)
		}
		if !got.GetStatus().GetKeySet() {
			t.Errorf("%s: status.key_set is false", what)
		}
	}
	check("Create", created)
	got, err := bt.Get(ctx, &apiv1.GetBackupTargetRequest{Name: "s3"})
	if err != nil {
		t.Fatal(err)
	}
	check("Get", got)
	list, err := bt.List(ctx, &apiv1.ListBackupTargetsRequest{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("List: %v %v", list, err)
	}
	check("List", list.Items[0])
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := bt.Watch(wctx, &apiv1.WatchBackupTargetsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Recv()
	if err != nil {
		t.Fatal(err)
	}
	check("Watch", ev.Object)

	// An update without the secret keeps the stored one; the bucket is
	// where the data is and cannot move.
	upd := proto.Clone(got).(*apiv1.BackupTarget)
	upd.Spec.S3.Region = "eu-west-1"
	after, err := bt.Update(ctx, &apiv1.UpdateBackupTargetRequest{BackupTarget: upd})
	if err != nil {
		t.Fatal(err)
	}
	check("Update", after)
	stored, err := f.st.BackupTargets.Get(ctx, "", "s3")
	if err != nil || stored.Spec.S3.SecretKey != testS3Secret || stored.Spec.S3.Region != "eu-west-1" {
		t.Fatalf("stored after an update without the secret: %v %v", stored, err)
	}
	moved := proto.Clone(after).(*apiv1.BackupTarget)
	moved.Spec.S3.Bucket = "elsewhere"
	_, err = bt.Update(ctx, &apiv1.UpdateBackupTargetRequest{BackupTarget: moved})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.s3.bucket") {
		t.Fatalf("moving the bucket: %v, want InvalidArgument naming spec.s3.bucket", err)
	}
}

func TestBackupTargetValidation(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	bt := apiv1.NewBackupTargetsClient(f.conn)
	for _, tc := range []struct {
		mutate func(*apiv1.BackupTarget)
		field  string
	}{
		{func(b *apiv1.BackupTarget) { b.Spec.S3.Endpoint = "ftp://x" }, "spec.s3.endpoint"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.Endpoint = "http://a:b@host" }, "spec.s3.endpoint"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.Endpoint = "https://host/path" }, "spec.s3.endpoint"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.Bucket = "Up" }, "spec.s3.bucket"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.Prefix = "../x" }, "spec.s3.prefix"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.Prefix = "/x" }, "spec.s3.prefix"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.SecretKey = "" }, "spec.s3.secret_key"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.SecretKey = "has space" }, "spec.s3.secret_key"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.AccessKey = "" }, "spec.s3.access_key"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3.CaCert = "x" }, "spec.s3.ca_cert"},
		{func(b *apiv1.BackupTarget) {
			b.Spec.Directory = &apiv1.DirectoryBackupTarget{Path: "/mnt/backups"}
		}, "spec"},
		{func(b *apiv1.BackupTarget) {
			b.Spec.S3 = nil
			b.Spec.Directory = &apiv1.DirectoryBackupTarget{Path: "/mnt/../etc"}
		}, "spec.directory.path"},
		{func(b *apiv1.BackupTarget) { b.Spec.S3 = nil }, "spec"},
	} {
		bad := s3Target("bad")
		tc.mutate(bad)
		_, err := bt.Create(ctx, &apiv1.CreateBackupTargetRequest{BackupTarget: bad})
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want InvalidArgument naming it", tc.field, err)
		}
		if err != nil && strings.Contains(err.Error(), "has space") {
			t.Errorf("the error echoes the secret key: %v", err)
		}
	}
}

// A backup, schedule or restore names an existing target; a restore a
// VM name that is free; a target in use cannot be deleted.
func TestBackupKindsNameWhatExists(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	bt := apiv1.NewBackupTargetsClient(f.conn)
	backups := apiv1.NewBackupsClient(f.conn)
	restores := apiv1.NewBackupRestoresClient(f.conn)
	schedules := apiv1.NewBackupSchedulesClient(f.conn)

	_, err := backups.Create(ctx, &apiv1.CreateBackupRequest{Backup: &apiv1.VirtualMachineBackup{
		Metadata: &apiv1.ObjectMeta{Name: "b1"}, Spec: &apiv1.VirtualMachineBackupSpec{Source: "web", Target: "nope"}}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.target") {
		t.Fatalf("backup to a missing target: %v", err)
	}
	if _, err := bt.Create(ctx, &apiv1.CreateBackupTargetRequest{BackupTarget: &apiv1.BackupTarget{
		Metadata: &apiv1.ObjectMeta{Name: "nfs"}, Spec: &apiv1.BackupTargetSpec{Directory: &apiv1.DirectoryBackupTarget{Path: "/mnt/backups"}}}}); err != nil {
		t.Fatal(err)
	}
	b, err := backups.Create(ctx, &apiv1.CreateBackupRequest{Backup: &apiv1.VirtualMachineBackup{
		Metadata: &apiv1.ObjectMeta{Name: "b1", Labels: map[string]string{apiv1.LabelNodeName: "n1"}},
		Spec:     &apiv1.VirtualMachineBackupSpec{Source: "web", Target: "nfs"}}})
	if err != nil {
		t.Fatal(err)
	}
	if b.Spec.DeletionPolicy != apiv1.DeletionPolicyRetain || b.Metadata.Labels[apiv1.LabelNodeName] != "" {
		t.Fatalf("backup as created: %v", b)
	}
	_, err = schedules.Create(ctx, &apiv1.CreateBackupScheduleRequest{BackupSchedule: &apiv1.VirtualMachineBackupSchedule{
		Metadata: &apiv1.ObjectMeta{Name: "nightly"}, Spec: &apiv1.VirtualMachineBackupScheduleSpec{Source: "web", Target: "nfs", Schedule: "@every 1s"}}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.schedule") {
		t.Fatalf("a schedule of every second: %v", err)
	}
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("taken")}); err != nil {
		t.Fatal(err)
	}
	_, err = restores.Create(ctx, &apiv1.CreateBackupRestoreRequest{BackupRestore: &apiv1.VirtualMachineBackupRestore{
		Metadata: &apiv1.ObjectMeta{Name: "r1"},
		Spec:     &apiv1.VirtualMachineBackupRestoreSpec{Target: "nfs", BackupId: "6f1c2a3e-0000-4000-8000-000000000001", VmName: "taken"}}})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "spec.vm_name") {
		t.Fatalf("restore into an existing VM: %v", err)
	}
	_, err = restores.Create(ctx, &apiv1.CreateBackupRestoreRequest{BackupRestore: &apiv1.VirtualMachineBackupRestore{
		Metadata: &apiv1.ObjectMeta{Name: "r1"},
		Spec:     &apiv1.VirtualMachineBackupRestoreSpec{Target: "nfs", BackupId: "../../etc", VmName: "new"}}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.backup_id") {
		t.Fatalf("restore of a backup id that is a path: %v", err)
	}
	_, err = bt.Delete(ctx, &apiv1.DeleteBackupTargetRequest{Name: "nfs"})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "backup default/b1") {
		t.Fatalf("deleting a target in use: %v", err)
	}
}

// A node gets a target's secret key only for an in-progress backup
// labelled with it that names the target, and only from a target that
// selects it; it writes only its part of that backup's status.
func TestNodeConnectsToABackupTargetOnlyForItsOwnBackup(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a, b := e.join("node-a"), e.join("node-b")
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := e.st.Nodes.Create(ctx(), &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: n, Labels: map[string]string{"backup": "yes"}}}); err != nil {
			t.Fatal(err)
		}
	}
	target := s3Target("s3")
	target.Spec.NodeSelector = map[string]string{"backup": "yes"}
	if _, err := e.admin().BackupTargets.Create(ctx(), &apiv1.CreateBackupTargetRequest{BackupTarget: target}); err != nil {
		t.Fatal(err)
	}
	mk := func(name, node, phase string) *apiv1.VirtualMachineBackup {
		bk, err := e.st.Backups.Create(ctx(), &apiv1.VirtualMachineBackup{
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{apiv1.LabelNodeName: node},
				Finalizers: []string{apiv1.FinalizerBackupUpload}},
			Spec:   &apiv1.VirtualMachineBackupSpec{Source: "web", Target: "s3"},
			Status: &apiv1.VirtualMachineBackupStatus{Phase: phase},
		})
		if err != nil {
			t.Fatal(err)
		}
		return bk
	}
	mk("pending", "node-a", apiv1.BackupPending)
	own := mk("own", "node-a", apiv1.BackupInProgress)
	key := func(n string) *apiv1.ObjectKey { return &apiv1.ObjectKey{Namespace: "default", Name: n} }

	_, err := a.c.BackupTargets.Connect(ctx(), &apiv1.ConnectBackupTargetRequest{Name: "s3"})
	wantCode(t, "node-a connecting for nothing", err, codes.InvalidArgument)
	_, err = b.c.BackupTargets.Connect(ctx(), &apiv1.ConnectBackupTargetRequest{Name: "s3", Backup: key("own")})
	wantCode(t, "node-b connecting for node-a's backup", err, codes.PermissionDenied)
	_, err = a.c.BackupTargets.Connect(ctx(), &apiv1.ConnectBackupTargetRequest{Name: "s3", Backup: key("pending")})
	wantCode(t, "node-a connecting for a backup not handed to it yet", err, codes.FailedPrecondition)
	conn, err := a.c.BackupTargets.Connect(ctx(), &apiv1.ConnectBackupTargetRequest{Name: "s3", Backup: key("own")})
	if err != nil || conn.GetBackupTarget().GetSpec().GetS3().GetSecretKey() != testS3Secret {
		t.Fatalf("node-a connecting for its own backup: %v %v", conn, err)
	}
	got, err := a.c.BackupTargets.Get(ctx(), &apiv1.GetBackupTargetRequest{Name: "s3"})
	if err != nil || got.GetSpec().GetS3().GetSecretKey() != "" {
		t.Fatalf("node-a reading the target: %v %v", got, err)
	}

	// A target that no longer selects the node gives it nothing.
	stored, _ := e.st.BackupTargets.Get(ctx(), "", "s3")
	stored.Spec.NodeSelector = map[string]string{"backup": "elsewhere"}
	if _, err := e.st.BackupTargets.Update(ctx(), stored); err != nil {
		t.Fatal(err)
	}
	_, err = a.c.BackupTargets.Connect(ctx(), &apiv1.ConnectBackupTargetRequest{Name: "s3", Backup: key("own")})
	wantCode(t, "node-a connecting to a target that does not select it", err, codes.PermissionDenied)

	// Its status write takes the node's part only: the phase stays.
	next := proto.Clone(own).(*apiv1.VirtualMachineBackup)
	next.Status.Phase = apiv1.BackupSucceeded
	next.Status.UploadPhase = apiv1.BackupSucceeded
	next.Status.ManifestId = "6f1c2a3e-0000-4000-8000-000000000001"
	out, err := a.c.Backups.UpdateStatus(ctx(), &apiv1.UpdateBackupStatusRequest{Backup: next})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != apiv1.BackupInProgress || out.Status.UploadPhase != apiv1.BackupSucceeded || out.Status.ManifestId == "" {
		t.Fatalf("after node-a's status write: %v", out.Status)
	}
	_, err = b.c.Backups.UpdateStatus(ctx(), &apiv1.UpdateBackupStatusRequest{Backup: out})
	wantCode(t, "node-b writing node-a's backup", err, codes.PermissionDenied)
	_, err = a.c.BackupTargets.ListManifests(ctx(), &apiv1.ListBackupManifestsRequest{Name: "s3"})
	wantCode(t, "node-a listing what the target holds", err, codes.PermissionDenied)
}
