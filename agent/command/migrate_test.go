package command

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

const firstMigration = "demo-migration-00001"

func TestMigrateSchedules(t *testing.T) {
	migs, ep := startMigrationFake(t)
	out := mustRun(t, ep, "migrate", "demo", "--to", "node-b", "--selector", "rack=r2,zone=a")
	if want := "VM demo was scheduled to migrate (migration " + firstMigration + ")\n"; out != want {
		t.Errorf("migrate printed %q, want %q", out, want)
	}
	want := map[string]string{apiv1.LabelNodeName: "node-b", "rack": "r2", "zone": "a"}
	migs.locked(func() {
		if got := migs.lastMigrate.GetAddedNodeSelector(); !reflect.DeepEqual(got, want) {
			t.Errorf("added_node_selector %v, want %v", got, want)
		}
		if k := migs.lastMigrate.GetKey(); k.GetNamespace() != "default" || k.GetName() != "demo" {
			t.Errorf("migrated %v", k)
		}
	})

	// Without --to or --selector nothing is added.
	migs.update("default", firstMigration, func(st *apiv1.VirtualMachineInstanceMigrationStatus) { st.Phase = apiv1.MigrationSucceeded })
	mustRun(t, ep, "migrate", "demo")
	migs.locked(func() {
		if got := migs.lastMigrate.GetAddedNodeSelector(); got != nil {
			t.Errorf("plain migrate sent added_node_selector %v", got)
		}
	})
}

func TestMigrateRefusals(t *testing.T) {
	_, ep := startMigrationFake(t)
	mustRun(t, ep, "migrate", "demo")
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"migrate", "stopped"}, "VM default/stopped is not running"},
		// A VM named like the subcommand is reached after --.
		{[]string{"migrate", "--", "cancel"}, "VM default/cancel is not running"},
		{[]string{"migrate", "demo"}, "migration " + firstMigration + " is already in progress for instance demo"},
		{[]string{"migrate", "demo", "--to", "node-b", "--selector", apiv1.LabelNodeName + "=node-c"},
			"--to node-b and --selector virtplane.io/node-name=node-c name different nodes"},
		{[]string{"migrate", "demo", "--selector", "rack"}, `invalid argument "rack" for "--selector" flag`},
		{[]string{"migrate", "demo", "--wait", "--timeout", "0s"}, "--timeout must be positive, got 0s"},
		{[]string{"migrate"}, "accepts 1 arg(s), received 0"},
	} {
		_, _, err := run(t, ep, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

// startMigrateWait runs migrate demo --wait in the background, until the
// command watches its migration.
func startMigrateWait(t *testing.T, extra ...string) (migs *fakeMigrations, stdout, stderr *testutil.SyncBuffer, done <-chan error) {
	t.Helper()
	migs, ep := startMigrationFake(t)
	stdout, stderr = &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	ch := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	go func() {
		ch <- runCmd(ctx, ep, "", stdout, stderr, append([]string{"migrate", "demo", "--wait"}, extra...)...)
	}()
	testutil.Eventually(t, 10*time.Second, "the command to watch the migration", func() bool { return migs.watchers() > 0 })
	return migs, stdout, stderr, ch
}

func waitMigrate(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("migrate --wait did not return")
		return nil
	}
}

func running(src, dst string, processed, remaining int64) func(*apiv1.VirtualMachineInstanceMigrationStatus) {
	return func(st *apiv1.VirtualMachineInstanceMigrationStatus) {
		st.Phase, st.TargetNode, st.Reason, st.Message = apiv1.MigrationRunning, dst, "", ""
		st.MigrationState = &apiv1.MigrationState{SourceNode: src, TargetNode: dst, Mode: apiv1.MigrationModePreCopy,
			Progress: &apiv1.MigrationProgress{DataTotalBytes: 1 << 30, DataProcessedBytes: processed, DataRemainingBytes: remaining, MemoryBytesPerSecond: 40 << 20}}
	}
}

// --wait prints each phase and the progress (plain lines: not a
// terminal), opens the watch again when it breaks without losing or
// repeating a change, and returns 0 once the migration succeeded.
func TestMigrateWaitSucceeds(t *testing.T) {
	migs, stdout, stderr, done := startMigrateWait(t)
	migs.update("default", firstMigration, func(st *apiv1.VirtualMachineInstanceMigrationStatus) {
		st.Phase, st.Reason, st.Message = apiv1.MigrationScheduling, "Unschedulable", "0/2 nodes are available: 1 node(s) were the source"
	})
	migs.update("default", firstMigration, func(st *apiv1.VirtualMachineInstanceMigrationStatus) {
		st.Phase, st.TargetNode, st.Reason, st.Message = apiv1.MigrationScheduled, "node-b", "", ""
	})
	migs.update("default", firstMigration, running("node-a", "node-b", 256<<20, 768<<20))
	testutil.Eventually(t, 10*time.Second, "the first progress line", func() bool { return strings.Contains(stderr.String(), "768.0 MiB of") })

	// The agent restarts: the change made meanwhile arrives through the
	// watch opened again from the last version seen.
	migs.breakWatches()
	migs.update("default", firstMigration, running("node-a", "node-b", 1000<<20, 24<<20))
	testutil.Eventually(t, 10*time.Second, "the watch to be opened again", func() bool { return migs.watchesOpened() == 2 })
	migs.update("default", firstMigration, func(st *apiv1.VirtualMachineInstanceMigrationStatus) {
		running("node-a", "node-b", 1<<30, 0)(st)
		st.Phase = apiv1.MigrationSucceeded
		st.MigrationState.Completed = true
		st.MigrationState.Progress.ElapsedMs, st.MigrationState.Progress.DowntimeMs = 3240, 187
	})
	if err := waitMigrate(t, done); err != nil {
		t.Fatalf("migrate --wait: %v\n%s", err, stderr)
	}
	if want := "VM demo was scheduled to migrate (migration " + firstMigration + ")\n" +
		"VM demo migrated from node-a to node-b in 3.2s (downtime 187 ms) (migration " + firstMigration + ")\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	want := "Pending\n" +
		"Scheduling (Unschedulable: 0/2 nodes are available: 1 node(s) were the source)\n" +
		"Scheduled: target node-b\n" +
		"Running: node-a -> node-b\n" +
		"  768.0 MiB of 1.0 GiB remaining (25% sent), 40.0 MiB/s\n"
	if got := stderr.String(); !strings.HasPrefix(got, want) {
		t.Errorf("progress:\n%s\nwant it to start with:\n%s", got, want)
	}
	// The progress seen only after the reopening is printed once at most
	// (plain output is rate-limited); the final phase always.
	if n := strings.Count(stderr.String(), "24.0 MiB of"); n > 1 {
		t.Errorf("a change was printed %d times:\n%s", n, stderr)
	}
	if !strings.Contains(stderr.String(), "Succeeded: node-a -> node-b\n") || strings.Contains(stderr.String(), "\x1b[") {
		t.Errorf("progress lacks the final phase, or has terminal escapes:\n%s", stderr)
	}
}

func TestMigrateWaitFails(t *testing.T) {
	migs, _, _, done := startMigrateWait(t)
	migs.update("default", firstMigration, running("node-a", "node-b", 0, 1<<30))
	migs.update("default", firstMigration, func(st *apiv1.VirtualMachineInstanceMigrationStatus) {
		st.Phase = apiv1.MigrationFailed
		st.MigrationState.Completed, st.MigrationState.Failed = true, true
		st.MigrationState.FailureReason = "the migration made no progress for 150s"
	})
	err := waitMigrate(t, done)
	if want := "migration " + firstMigration + " failed: the migration made no progress for 150s; VM demo stays on node-a"; err == nil || err.Error() != want {
		t.Fatalf("migrate --wait: %v, want %q", err, want)
	}
}

// A migration that never found a target fails with the controller's
// reason.
func TestMigrateWaitFailsUnschedulable(t *testing.T) {
	migs, _, _, done := startMigrateWait(t)
	migs.update("default", firstMigration, func(st *apiv1.VirtualMachineInstanceMigrationStatus) {
		st.Phase, st.Reason, st.Message = apiv1.MigrationFailed, "Unschedulable", "no node could take the migration target for 5m0s"
	})
	err := waitMigrate(t, done)
	if want := "migration " + firstMigration + " failed: Unschedulable: no node could take the migration target for 5m0s"; err == nil || err.Error() != want {
		t.Fatalf("migrate --wait: %v, want %q", err, want)
	}
}

func TestMigrateWaitTimesOut(t *testing.T) {
	migs, _, _, done := startMigrateWait(t, "--timeout", "1s")
	migs.update("default", firstMigration, func(st *apiv1.VirtualMachineInstanceMigrationStatus) { st.Phase = apiv1.MigrationScheduling })
	err := waitMigrate(t, done)
	if err == nil || !strings.HasPrefix(err.Error(), "timed out after 1s waiting for migration "+firstMigration+" (phase Scheduling); it keeps running: "+
		"`virtplane-agent get migration "+firstMigration+" -w` follows it, `virtplane-agent migrate cancel demo` cancels it") {
		t.Fatalf("migrate --wait --timeout 1s: %v", err)
	}
	if m := migs.get("default", firstMigration); m == nil || m.Metadata.DeletionTimestamp != nil {
		t.Error("the timeout touched the migration")
	}
}

// A migration that disappears before it ended ends --wait with an error.
func TestMigrateWaitDeleted(t *testing.T) {
	migs, _, _, done := startMigrateWait(t)
	migs.update("default", firstMigration, func(st *apiv1.VirtualMachineInstanceMigrationStatus) { st.Phase = apiv1.MigrationScheduling })
	migs.locked(func() { migs.store(apiv1.EventType_DELETED, migs.migs["default/"+firstMigration]) })
	err := waitMigrate(t, done)
	if want := "migration " + firstMigration + " was deleted before it ended (last phase Scheduling)"; err == nil || err.Error() != want {
		t.Fatalf("migrate --wait: %v, want %q", err, want)
	}
}

// testMigration is a migration of vm in phase, made by the test.
func testMigration(ns, name, vm, phase string) *apiv1.VirtualMachineInstanceMigration {
	return &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name, Uid: "uid-" + name,
			Labels: map[string]string{apiv1.LabelMigrationVMIName: vm}, CreationTimestamp: timestamppb.New(time.Now().Add(-2 * time.Minute))},
		Spec:   &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: vm},
		Status: &apiv1.VirtualMachineInstanceMigrationStatus{Phase: phase},
	}
}

// migrate cancel deletes the VM's migrations that have not ended, and
// only those.
func TestMigrateCancel(t *testing.T) {
	migs, ep := startMigrationFake(t)
	migs.put(testMigration("default", "demo-old", "demo", apiv1.MigrationSucceeded))
	migs.put(testMigration("default", "demo-now", "demo", apiv1.MigrationRunning))
	migs.put(testMigration("default", "other-now", "other", apiv1.MigrationRunning))
	migs.put(testMigration("prod", "demo-prod", "demo", apiv1.MigrationRunning))

	if out := mustRun(t, ep, "migrate", "cancel", "demo"); out != "migration demo-now of VM demo canceled (phase Running)\n" {
		t.Errorf("migrate cancel printed %q", out)
	}
	if got := migs.deletedNames(); !reflect.DeepEqual(got, []string{"demo-now"}) {
		t.Errorf("deleted %v, want [demo-now]", got)
	}
	// Canceled but not yet ended: said so, not deleted again.
	if out := mustRun(t, ep, "migrate", "cancel", "demo"); out != "migration demo-now is already being canceled (phase Running)\n" {
		t.Errorf("second migrate cancel printed %q", out)
	}
	if got := migs.deletedNames(); len(got) != 1 {
		t.Errorf("deleted %v", got)
	}
	mustRun(t, ep, "-n", "prod", "migrate", "cancel", "demo")
	if got := migs.deletedNames(); !reflect.DeepEqual(got, []string{"demo-now", "demo-prod"}) {
		t.Errorf("deleted %v after -n prod", got)
	}

	migs.update("default", "demo-now", func(st *apiv1.VirtualMachineInstanceMigrationStatus) { st.Phase = apiv1.MigrationFailed })
	for _, vm := range []string{"demo", "nothing"} {
		_, _, err := run(t, ep, "migrate", "cancel", vm)
		if want := "Found no migration to cancel for " + vm; err == nil || err.Error() != want {
			t.Errorf("migrate cancel %s: %v, want %q", vm, err, want)
		}
	}
}

func TestGetMigrations(t *testing.T) {
	migs, ep := startMigrationFake(t)
	m := testMigration("default", "demo-migration-abcde", "demo", apiv1.MigrationRunning)
	m.Status.TargetNode = "node-b"
	m.Status.MigrationState = &apiv1.MigrationState{SourceNode: "node-a", TargetNode: "node-b",
		Progress: &apiv1.MigrationProgress{DataTotalBytes: 1000, DataProcessedBytes: 420, DataRemainingBytes: 580}}
	migs.put(m)
	migs.put(testMigration("default", "web-migration-fghij", "web", apiv1.MigrationScheduling))
	migs.put(testMigration("prod", "db-migration-klmno", "db", ""))

	want := "NAME                   VMI    PHASE        SOURCE   TARGET   PROGRESS   AGE\n" +
		"demo-migration-abcde   demo   Running      node-a   node-b   42%        2m\n" +
		"web-migration-fghij    web    Scheduling   <none>   <none>   <none>     2m\n"
	for _, kind := range []string{"migrations", "migration", "vmim", "vmims", "virtualmachineinstancemigrations"} {
		if out := mustRun(t, ep, "get", kind); out != want {
			t.Errorf("get %s:\n%s\nwant:\n%s", kind, out, want)
		}
	}
	out := mustRun(t, ep, "get", "migrations", "-A", "-l", apiv1.LabelMigrationVMIName+" in (db,demo)")
	if want := "NAMESPACE   NAME                   VMI    PHASE     SOURCE   TARGET   PROGRESS   AGE\n" +
		"default     demo-migration-abcde   demo   Running   node-a   node-b   42%        2m\n" +
		"prod        db-migration-klmno     db     Pending   <none>   <none>   <none>     2m\n"; out != want {
		t.Errorf("get migrations -A -l:\n%s\nwant:\n%s", out, want)
	}
	out = mustRun(t, ep, "get", "migration", "demo-migration-abcde", "-o", "yaml")
	for _, w := range []string{"kind: VirtualMachineInstanceMigration\n", "vmi_name: demo\n", "data_processed_bytes: \"420\"\n", "source_node: node-a\n"} {
		if !strings.Contains(out, w) {
			t.Errorf("get -o yaml lacks %q:\n%s", w, out)
		}
	}
	_, _, err := run(t, ep, "get", "migration", "nope")
	if err == nil || err.Error() != `migration "nope" not found` {
		t.Errorf("get migration nope: %v", err)
	}

	// -w prints a row per change.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wout, werr testutil.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- runCmd(ctx, ep, "", &wout, &werr, "get", "vmim", "web-migration-fghij", "-w") }()
	testutil.Eventually(t, 10*time.Second, "the first row", func() bool { return strings.Count(wout.String(), "\n") == 2 })
	migs.update("default", "web-migration-fghij", func(st *apiv1.VirtualMachineInstanceMigrationStatus) {
		st.Phase, st.TargetNode = apiv1.MigrationScheduled, "node-c"
	})
	testutil.Eventually(t, 10*time.Second, "the Scheduled row", func() bool {
		return strings.Contains(wout.String(), "web-migration-fghij    web            Scheduled    <none>     node-c     <none>     2m\n")
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("get -w: %v\n%s", err, wout.String())
	}
}

func TestDeleteMigration(t *testing.T) {
	migs, ep := startMigrationFake(t)
	migs.put(testMigration("default", "demo-migration-abcde", "demo", apiv1.MigrationRunning))
	migs.put(testMigration("default", "web-migration-fghij", "web", apiv1.MigrationSucceeded))

	if out := mustRun(t, ep, "delete", "migration", "web-migration-fghij"); out != "migration \"web-migration-fghij\" deleted (it had ended: Succeeded)\n" {
		t.Errorf("delete of an ended migration printed %q", out)
	}
	// --wait returns once the controller released the canceled migration.
	done := make(chan error, 1)
	var out, errOut testutil.SyncBuffer
	go func() {
		done <- runCmd(context.Background(), ep, "", &out, &errOut, "delete", "vmim", "demo-migration-abcde", "--wait")
	}()
	testutil.Eventually(t, 10*time.Second, "the cancel to be reported", func() bool {
		return out.String() == "migration \"demo-migration-abcde\" canceled (phase Running)\n"
	})
	testutil.Consistently(t, 200*time.Millisecond, "delete --wait waiting while the migration is there", func() bool { return len(done) == 0 })
	migs.update("default", "demo-migration-abcde", func(st *apiv1.VirtualMachineInstanceMigrationStatus) { st.Phase = apiv1.MigrationFailed })
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("delete --wait did not return after the migration was gone")
	}
	_, _, err := run(t, ep, "delete", "migration", "nope")
	if err == nil || err.Error() != `migration "nope" not found` {
		t.Errorf("delete migration nope: %v", err)
	}
}

func TestMigrationKindCompletion(t *testing.T) {
	_, ep := startMigrationFake(t)
	for _, args := range [][]string{{"__complete", "get", ""}, {"__complete", "delete", ""}} {
		out := mustRun(t, ep, args...)
		if !strings.Contains(out, "migration\n") {
			t.Errorf("%v does not offer migration:\n%s", args, out)
		}
	}
}
