package command

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/apiserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

// get, delete and apply know the snapshot kinds by KubeVirt's names.

func TestGetSnapshotKinds(t *testing.T) {
	f := startSnapshotFake(t)
	putSnapshots(f)
	created := timestamppb.New(time.Now().Add(-3 * time.Hour))
	f.contents.put(&apiv1.VirtualMachineSnapshotContent{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: apiv1.SnapshotContentName("u1"), Uid: "c1", CreationTimestamp: created},
		Spec:     &apiv1.VirtualMachineSnapshotContentSpec{SnapshotName: "demo-1", SnapshotUid: "u1", NodeName: "node-a", Volumes: []string{"root", "data"}},
		Status:   &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true},
	})
	f.restores.put(&apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "r1", Uid: "r1", CreationTimestamp: created},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: "demo", Snapshot: "demo-1"},
		Status:   &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreSucceeded, Complete: true, RestoreTime: timestamppb.New(snapNow), NodeName: "node-a"},
	})
	f.clones.put(&apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "c1", Uid: "c1", CreationTimestamp: created},
		Spec:     &apiv1.VirtualMachineCloneSpec{SourceKind: apiv1.CloneSourceSnapshot, SourceName: "demo-1", Target: "demo-copy"},
		Status:   &apiv1.VirtualMachineCloneStatus{Phase: apiv1.CloneRestoreInProgress, RestoreName: "clone-c1-restore"},
	})

	for _, name := range []string{"vmsnapshot", "vmsnapshots", "vmsnap", "snapshot", "VirtualMachineSnapshots"} {
		if out := mustRun(t, f.ep, "get", name); !strings.HasPrefix(out, "NAME     SOURCE   PHASE       READY   INDICATIONS") || strings.Count(out, "\n") != 4 {
			t.Errorf("get %s:\n%s", name, out)
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"get", "vmsnapshotcontent"},
			"NAME                    SNAPSHOT   NODE     PHASE       READY   VOLUMES   AGE\n" +
				"vmsnapshot-content-u1   demo-1     node-a   Succeeded   True    2         3h\n"},
		{[]string{"get", "vmrestore", "-o", "wide"},
			"NAME   TARGET   SNAPSHOT   PHASE       COMPLETE   RESTORED               AGE   NODE\n" +
				"r1     demo     demo-1     Succeeded   True       2025-01-02T03:04:05Z   3h    node-a\n"},
		{[]string{"get", "vmclone", "-o", "wide"},
			"NAME   SOURCE              TARGET      PHASE               AGE   SNAPSHOT   RESTORE\n" +
				"c1     vmsnapshot/demo-1   demo-copy   RestoreInProgress   3h    <none>     clone-c1-restore\n"},
		{[]string{"get", "vmsnap", "db-1"},
			"NAME   SOURCE   PHASE    READY   INDICATIONS   CREATED   NODE     AGE\n" +
				"db-1   db       Failed   False   <none>        <none>    <none>   3h\n"},
	} {
		if out := mustRun(t, f.ep, tt.args...); out != tt.want {
			t.Errorf("%s:\n%s\nwant:\n%s", strings.Join(tt.args, " "), out, tt.want)
		}
	}
	out := mustRun(t, f.ep, "get", "vmrestore", "r1", "-o", "json")
	if !strings.HasPrefix(out, "{\n    \"kind\": \"VirtualMachineRestore\",") || !strings.Contains(out, `"complete": true`) {
		t.Errorf("get vmrestore r1 -o json:\n%s", out)
	}
	if _, _, err := run(t, f.ep, "get", "vmclone", "nothing"); err == nil || err.Error() != `virtualmachineclone "nothing" not found` {
		t.Errorf("get of a missing clone: %v", err)
	}

	// delete takes every kind, and says what it deleted.
	for _, tt := range []struct{ kind, name, want string }{
		{"vmrestore", "r1", `virtualmachinerestore "r1" deleted`},
		{"vmclone", "c1", `virtualmachineclone "c1" deleted`},
		{"vmsnapshotcontent", apiv1.SnapshotContentName("u1"), `virtualmachinesnapshotcontent "vmsnapshot-content-u1" deleted`},
		{"vmsnap", "db-1", `virtualmachinesnapshot "db-1" deleted`},
	} {
		if out := mustRun(t, f.ep, "delete", tt.kind, tt.name); out != tt.want+"\n" {
			t.Errorf("delete %s %s printed %q, want %q", tt.kind, tt.name, out, tt.want)
		}
	}
	if got := f.restores.deletedNames(); len(got) != 1 || got[0] != "r1" {
		t.Errorf("restores deleted: %v", got)
	}
	if got := f.contents.deletedNames(); len(got) != 1 {
		t.Errorf("contents deleted: %v", got)
	}
}

func TestDeleteVMDeleteSnapshots(t *testing.T) {
	f := startSnapshotFake(t)
	mustRun(t, f.ep, "apply", "-f", example)
	if out := mustRun(t, f.ep, "delete", "vm", "demo", "--delete-snapshots"); out != "virtualmachine \"demo\" deleted with its snapshots\n" {
		t.Errorf("delete --delete-snapshots printed %q", out)
	}
	want := &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "demo"}, DeleteSnapshots: true}
	if got := f.vms.lastDelete(); !proto.Equal(got, want) {
		t.Errorf("delete request %v, want %v", got, want)
	}

	// Without the flag the snapshots stay.
	mustRun(t, f.ep, "apply", "-f", example)
	mustRun(t, f.ep, "delete", "vm", "demo")
	if got := f.vms.lastDelete(); got.GetDeleteSnapshots() {
		t.Error("delete vm without --delete-snapshots asked for the snapshots to go")
	}

	if _, _, err := run(t, f.ep, "delete", "pool", "db", "--delete-snapshots"); err == nil || err.Error() != "--delete-snapshots applies to vm only, not virtualmachinepool" {
		t.Errorf("delete pool --delete-snapshots: %v", err)
	}
}

// The examples apply; applying one again is unchanged even though the
// server filled in defaults the manifest leaves out, and a changed one
// is refused, as the specs are immutable.
func TestApplySnapshotKinds(t *testing.T) {
	f := startSnapshotFake(t)
	for _, tt := range []struct{ file, want string }{
		{"snapshot.yaml", "virtualmachinesnapshot/db-0-before-upgrade"},
		{"restore.yaml", "virtualmachinerestore/db-0-restore"},
		{"clone.yaml", "virtualmachineclone/db-copy-clone"},
	} {
		file := "../../examples/" + tt.file
		if out := mustRun(t, f.ep, "apply", "-f", file); out != tt.want+" created\n" {
			t.Errorf("apply %s printed %q", tt.file, out)
		}
		if out := mustRun(t, f.ep, "apply", "-f", file); out != tt.want+" unchanged\n" {
			t.Errorf("second apply %s printed %q", tt.file, out)
		}
	}
	if got := f.snaps.lastCreated().GetSpec(); got.GetSource() != "db-0" || got.GetFailureDeadlineSeconds() != 600 {
		t.Errorf("snapshot.yaml created %v", got)
	}
	if got := f.restores.lastCreated().GetSpec(); !got.GetNewIdentity() || got.GetTarget() != "db-0-restored" {
		t.Errorf("restore.yaml created %v", got)
	}

	// Defaults left out of the manifest are no change.
	dir := t.TempDir()
	bare := filepath.Join(dir, "bare.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(bare, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("kind: VirtualMachineSnapshot\nmetadata: {name: bare}\nspec: {source: demo}\n---\n" +
		"kind: VirtualMachineClone\nmetadata: {name: bare}\nspec: {source_name: demo, target: copy}\n")
	mustRun(t, f.ep, "apply", "-f", bare)
	if out := mustRun(t, f.ep, "apply", "-f", bare); out != "virtualmachinesnapshot/bare unchanged\nvirtualmachineclone/bare unchanged\n" {
		t.Errorf("second apply of manifests without defaults printed %q", out)
	}

	write("kind: VirtualMachineSnapshot\nmetadata: {name: bare}\nspec: {source: demo, deletion_policy: Retain}\n")
	_, _, err := run(t, f.ep, "apply", "-f", bare)
	want := `VirtualMachineSnapshot "bare" exists with another spec, labels or annotations; a virtualmachinesnapshot cannot be changed: delete it and apply again`
	if err == nil || err.Error() != want {
		t.Errorf("apply of a changed snapshot: %v, want %q", err, want)
	}
	if n := len(f.snaps.created); n != 2 {
		t.Errorf("%d snapshot creates, want 2", n)
	}
}

// startSnapshotAPI is startAPI with the snapshot kinds' stores: the real
// API's defaults, validation and delete_snapshots, without controllers.
func startSnapshotAPI(t *testing.T) (apiserver.Stores, string) {
	t.Helper()
	db := memstore.NewDB(func() time.Time { return time.Now().Add(-3 * time.Hour) })
	st := apiserver.Stores{
		VMs:              memstore.New(db, store.VirtualMachines),
		VMIs:             memstore.New(db, store.VirtualMachineInstances),
		Nodes:            memstore.New(db, store.Nodes),
		Migrations:       memstore.New(db, store.Migrations),
		Images:           memstore.New(db, store.Images),
		ReplicaSets:      memstore.New(db, store.ReplicaSets),
		Pools:            memstore.New(db, store.Pools),
		Snapshots:        memstore.New(db, store.Snapshots),
		SnapshotContents: memstore.New(db, store.SnapshotContents),
		Restores:         memstore.New(db, store.Restores),
		Clones:           memstore.New(db, store.Clones),
	}
	srv := apiserver.New(st, apiserver.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return st, serveUnix(t, func(g *grpc.Server) { srv.Register(g) })
}

// Against the real API: what the server defaults does not make a second
// apply a change, its refusals reach the user with the field, and
// --delete-snapshots deletes the VM's snapshots.
func TestSnapshotKindsAgainstAPI(t *testing.T) {
	st, ep := startSnapshotAPI(t)
	for _, tt := range []struct{ file, want string }{
		{"snapshot.yaml", "virtualmachinesnapshot/db-0-before-upgrade"},
		{"clone.yaml", "virtualmachineclone/db-copy-clone"},
	} {
		file := "../../examples/" + tt.file
		if out := mustRun(t, ep, "apply", "-f", file); out != tt.want+" created\n" {
			t.Errorf("apply %s printed %q", tt.file, out)
		}
		if out := mustRun(t, ep, "apply", "-f", file); out != tt.want+" unchanged\n" {
			t.Errorf("second apply %s printed %q", tt.file, out)
		}
	}

	_, _, err := run(t, ep, "snapshot", "create", "demo", "--failure-deadline", "200h")
	if err == nil || !strings.Contains(err.Error(), "spec.failure_deadline_seconds: Invalid value: 720000") {
		t.Errorf("a deadline past the server's bound: %v", err)
	}

	mustRun(t, ep, "apply", "-f", example)
	mustRun(t, ep, "snapshot", "create", "demo", "--name", "s1")
	if out := mustRun(t, ep, "snapshot", "list", "demo"); !strings.Contains(out, "s1     demo     Pending") {
		t.Errorf("snapshot list demo:\n%s", out)
	}
	// The controller records the VM's uid, by which the VM's delete
	// finds its snapshots.
	vm, err := st.VMs.Get(context.Background(), "default", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Snapshots.GuaranteedUpdate(context.Background(), "default", "s1", func(s *apiv1.VirtualMachineSnapshot) (*apiv1.VirtualMachineSnapshot, error) {
		s.Status.SourceUid = vm.GetMetadata().GetUid()
		return s, nil
	}); err != nil {
		t.Fatal(err)
	}
	mustRun(t, ep, "delete", "vm", "demo", "--delete-snapshots")
	if _, err := st.Snapshots.Get(context.Background(), "default", "s1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("snapshot s1 after delete vm --delete-snapshots: %v", err)
	}
	if _, err := st.Snapshots.Get(context.Background(), "default", "db-0-before-upgrade"); err != nil {
		t.Errorf("another VM's snapshot after delete vm demo --delete-snapshots: %v", err)
	}
}
