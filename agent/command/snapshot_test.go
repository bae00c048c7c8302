package command

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// snapNow is the fake clock's time: default names end in 20250102030405.
var snapNow = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

func TestSnapshotCreateRequest(t *testing.T) {
	f := startSnapshotFake(t)
	clk := clocktesting.NewFakeClock(snapNow.In(time.FixedZone("CET", 3600)))

	// Defaults: the name is stamped in UTC, the policy and the deadline
	// are left to the server.
	out, _, err := runClock(t, f.ep, clk, "snapshot", "create", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if want := "snapshot demo-20250102030405 of VM demo created\n"; out != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	got := f.snaps.lastCreated()
	want := &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "demo-20250102030405"},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "demo"},
	}
	if !proto.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}

	// Every flag.
	if _, _, err := runClock(t, f.ep, clk, "-n", "prod", "snapshot", "create", "db", "--name", "before-upgrade",
		"--deletion-policy", "Retain", "--failure-deadline", "15m"); err != nil {
		t.Fatal(err)
	}
	want = &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: "prod", Name: "before-upgrade"},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "db", DeletionPolicy: apiv1.DeletionPolicyRetain, FailureDeadlineSeconds: proto.Int64(900)},
	}
	if got := f.snaps.lastCreated(); !proto.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}

	// --failure-deadline 0 is sent (never fail), not left to the default.
	if _, _, err := runClock(t, f.ep, clk, "snapshot", "create", "demo", "--name", "forever", "--failure-deadline", "0s"); err != nil {
		t.Fatal(err)
	}
	if got := f.snaps.lastCreated().GetSpec().FailureDeadlineSeconds; got == nil || *got != 0 {
		t.Errorf("--failure-deadline 0s sent %v, want 0", got)
	}

	// The server's answer is reworded with the snapshot's name.
	_, _, err = runClock(t, f.ep, clk, "snapshot", "create", "demo", "--name", "forever")
	if err == nil || !strings.Contains(err.Error(), `VirtualMachineSnapshot "forever" already exists`) {
		t.Errorf("a second snapshot of the same name: %v", err)
	}
}

func TestSnapshotCreateRefusals(t *testing.T) {
	f := startSnapshotFake(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--deletion-policy", "delete"}, `--deletion-policy "delete": want Delete or Retain`},
		{[]string{"--failure-deadline", "5x"}, `invalid argument "5x" for "--failure-deadline" flag`},
		{[]string{"--failure-deadline", "-1m"}, "--failure-deadline must not be negative, got -1m0s"},
		{[]string{"--failure-deadline", "1500ms"}, "--failure-deadline must be whole seconds, got 1.5s"},
		{[]string{"--wait", "--timeout", "0s"}, "--timeout must be positive, got 0s"},
	} {
		_, _, err := run(t, f.ep, append([]string{"snapshot", "create", "demo"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	if _, _, err := run(t, f.ep, "snapshot", "create"); err == nil || !strings.Contains(err.Error(), "accepts 1 arg(s), received 0") {
		t.Errorf("snapshot create without a VM: %v", err)
	}
	if n := len(f.snaps.created); n != 0 {
		t.Errorf("refused commands created %d snapshots", n)
	}
}

func snapshotStatus(change func(*apiv1.VirtualMachineSnapshotStatus)) func(*apiv1.VirtualMachineSnapshot) {
	return func(s *apiv1.VirtualMachineSnapshot) {
		if s.Status == nil {
			s.Status = &apiv1.VirtualMachineSnapshotStatus{}
		}
		change(s.Status)
	}
}

// --wait prints the phases, what the snapshot waits for, its
// indications and volumes, each once; opens the watch again when it
// breaks without losing a change; and returns 0 once it succeeded.
func TestSnapshotCreateWaitSucceeds(t *testing.T) {
	f := startSnapshotFake(t)
	stdout, stderr, done := startWait(t, f.ep, f.snaps.watchers, "snapshot", "create", "demo", "--name", "s1", "--wait")
	f.snaps.update("default", "s1", snapshotStatus(func(st *apiv1.VirtualMachineSnapshotStatus) {
		st.Phase = apiv1.SnapshotInProgress
		st.Conditions = []*apiv1.Condition{{Type: "Progressing", Status: "False", Reason: "SourceNotLocked", Message: `Source not locked: restore "r" holds the VM`}}
	}))
	f.snaps.update("default", "s1", snapshotStatus(func(st *apiv1.VirtualMachineSnapshotStatus) {
		st.Conditions = []*apiv1.Condition{{Type: "Progressing", Status: "True"}}
		st.NodeName = "node-a"
		st.Indications = []string{apiv1.IndicationOnline, apiv1.IndicationGuestAgent}
	}))
	testutil.Eventually(t, 10*time.Second, "the indications", func() bool { return strings.Contains(stderr.String(), "indications") })

	// The agent restarts: the change made meanwhile arrives through the
	// watch opened again from the last version seen.
	f.snaps.breakWatches()
	f.snaps.update("default", "s1", snapshotStatus(func(st *apiv1.VirtualMachineSnapshotStatus) {
		st.IncludedVolumes, st.ExcludedVolumes = []string{"root", "data"}, []string{"cloudinit"}
	}))
	testutil.Eventually(t, 10*time.Second, "the watch to be opened again", func() bool { return f.snaps.watchesOpened() == 2 })
	f.snaps.update("default", "s1", snapshotStatus(func(st *apiv1.VirtualMachineSnapshotStatus) {
		st.Phase, st.ReadyToUse, st.CreationTime = apiv1.SnapshotSucceeded, true, timestamppb.New(snapNow)
	}))
	if err := waitCommand(t, done); err != nil {
		t.Fatalf("snapshot create --wait: %v\n%s", err, stderr)
	}
	if want := "snapshot s1 of VM demo created\nsnapshot s1 of VM demo is ready (2 volumes on node-a)\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	want := "Pending\n" +
		`InProgress (SourceNotLocked: Source not locked: restore "r" holds the VM)` + "\n" +
		"InProgress\n" +
		"  node: node-a\n" +
		"  indications: Online, GuestAgent\n" +
		"  volumes: copied root, data; left out cloudinit\n" +
		"Succeeded\n"
	if stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
	}
}

func TestSnapshotCreateWaitFails(t *testing.T) {
	f := startSnapshotFake(t)
	stdout, stderr, done := startWait(t, f.ep, f.snaps.watchers, "snapshot", "create", "demo", "--name", "s1", "--wait")
	// Details found in the same write as the last phase come before it.
	f.snaps.update("default", "s1", snapshotStatus(func(st *apiv1.VirtualMachineSnapshotStatus) {
		st.Phase, st.Error, st.NodeName = apiv1.SnapshotFailed, "snapshot deadline exceeded", "node-a"
	}))
	err := waitCommand(t, done)
	if want := "snapshot s1 of VM demo failed: snapshot deadline exceeded"; err == nil || err.Error() != want {
		t.Errorf("err %v, want %q", err, want)
	}
	if want := "snapshot s1 of VM demo created\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	if want := "Pending\n  node: node-a\nFailed\n"; stderr.String() != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

func TestSnapshotCreateWaitEnds(t *testing.T) {
	t.Run("deleted", func(t *testing.T) {
		f := startSnapshotFake(t)
		_, _, done := startWait(t, f.ep, f.snaps.watchers, "snapshot", "create", "demo", "--name", "s1", "--wait")
		f.snaps.finishDelete("default", "s1")
		err := waitCommand(t, done)
		if want := "snapshot s1 was deleted before it ended (last phase Pending)"; err == nil || err.Error() != want {
			t.Errorf("err %v, want %q", err, want)
		}
	})
	t.Run("being deleted", func(t *testing.T) {
		f := startSnapshotFake(t)
		f.snaps.holdDeletes = true
		_, _, done := startWait(t, f.ep, f.snaps.watchers, "snapshot", "create", "demo", "--name", "s1", "--wait")
		f.snaps.update("default", "s1", snapshotStatus(func(st *apiv1.VirtualMachineSnapshotStatus) { st.Phase = apiv1.SnapshotDeleting }))
		err := waitCommand(t, done)
		if want := "snapshot s1 of VM demo is being deleted (phase Deleting)"; err == nil || err.Error() != want {
			t.Errorf("err %v, want %q", err, want)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := startSnapshotFake(t)
		_, _, err := run(t, f.ep, "snapshot", "create", "demo", "--name", "s1", "--wait", "--timeout", "300ms")
		want := "timed out after 300ms waiting for virtualmachinesnapshot s1 (phase Pending); it keeps going: `virtplane-agent get vmsnapshot s1 -w` follows it"
		if err == nil || err.Error() != want {
			t.Errorf("err %v, want %q", err, want)
		}
	})
}

// putSnapshots stores two snapshots of demo and one of db, as the
// controller would have them.
func putSnapshots(f *snapFake) {
	created := timestamppb.New(time.Now().Add(-3 * time.Hour))
	for _, s := range []*apiv1.VirtualMachineSnapshot{
		{
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "demo-1", Uid: "u1", CreationTimestamp: created},
			Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "demo"},
			Status: &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotSucceeded, ReadyToUse: true, CreationTime: timestamppb.New(snapNow),
				Indications: []string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent}, NodeName: "node-a",
				IncludedVolumes: []string{"root"}, ExcludedVolumes: []string{"cloudinit"}},
		},
		{
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "demo-2", Uid: "u2", CreationTimestamp: created},
			Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "demo"},
		},
		{
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "db-1", Uid: "u3", CreationTimestamp: created},
			Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "db"},
			Status:   &apiv1.VirtualMachineSnapshotStatus{Phase: apiv1.SnapshotFailed, Error: "qemu-img: no space left"},
		},
	} {
		f.snaps.put(s)
	}
}

func TestSnapshotListGetDelete(t *testing.T) {
	f := startSnapshotFake(t)
	putSnapshots(f)

	want := "NAME     SOURCE   PHASE       READY   INDICATIONS           CREATED                NODE     AGE\n" +
		"demo-1   demo     Succeeded   True    Online,NoGuestAgent   2025-01-02T03:04:05Z   node-a   3h\n" +
		"demo-2   demo     Pending     False   <none>                <none>                 <none>   3h\n"
	if out := mustRun(t, f.ep, "snapshot", "list", "demo"); out != want {
		t.Errorf("snapshot list demo:\n%s\nwant:\n%s", out, want)
	}
	if out := mustRun(t, f.ep, "snapshot", "list"); !strings.Contains(out, "db-1     db       Failed") || strings.Count(out, "\n") != 4 {
		t.Errorf("snapshot list:\n%s", out)
	}
	if out := mustRun(t, f.ep, "snapshot", "list", "demo", "-o", "wide"); !strings.Contains(strings.Split(out, "\n")[1], "node-a   3h    root       cloudinit") {
		t.Errorf("snapshot list -o wide:\n%s", out)
	}
	out, errOut, err := run(t, f.ep, "snapshot", "list", "nothing")
	if err != nil || out != "" || errOut != "No snapshots of VM nothing found in default namespace.\n" {
		t.Errorf("snapshot list of a VM without snapshots: %q %q %v", out, errOut, err)
	}
	if out := mustRun(t, f.ep, "snapshot", "list", "db", "-o", "json"); !strings.Contains(out, `"kind": "List"`) || !strings.Contains(out, `"error": "qemu-img: no space left"`) || strings.Contains(out, "demo-1") {
		t.Errorf("snapshot list db -o json:\n%s", out)
	}

	out = mustRun(t, f.ep, "snapshot", "get", "demo-1", "-o", "yaml")
	for _, want := range []string{"kind: VirtualMachineSnapshot\n", "  name: demo-1\n", "  source: demo\n", "  - Online\n", "  node_name: node-a\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("snapshot get -o yaml lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := run(t, f.ep, "snapshot", "get", "nothing"); err == nil || err.Error() != `virtualmachinesnapshot "nothing" not found` {
		t.Errorf("snapshot get of a missing one: %v", err)
	}

	// delete --wait returns once the snapshot is gone, not when it is
	// marked for deletion.
	f.snaps.holdDeletes = true
	stdout, _, done := startWait(t, f.ep, f.snaps.watchers, "snapshot", "delete", "demo-1", "demo-2", "--wait")
	f.snaps.finishDelete("default", "demo-1")
	f.snaps.finishDelete("default", "demo-2")
	if err := waitCommand(t, done); err != nil {
		t.Fatal(err)
	}
	if want := "virtualmachinesnapshot \"demo-1\" deleted\nvirtualmachinesnapshot \"demo-2\" deleted\n"; stdout.String() != want {
		t.Errorf("snapshot delete printed %q, want %q", stdout, want)
	}
	if got := f.snaps.deletedNames(); strings.Join(got, ",") != "demo-1,demo-2" {
		t.Errorf("deleted %v", got)
	}
}
