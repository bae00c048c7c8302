package command

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func TestRestoreRequest(t *testing.T) {
	f := startSnapshotFake(t)
	clk := clocktesting.NewFakeClock(snapNow)

	out, _, err := runClock(t, f.ep, clk, "restore", "demo", "--snapshot", "demo-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "restore demo-restore-20250102030405 of VM demo from snapshot demo-1 created\n"; out != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	want := &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "demo-restore-20250102030405"},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: "demo", Snapshot: "demo-1"},
	}
	if got := f.restores.lastCreated(); !proto.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}

	for _, policy := range readinessPolicies {
		if _, _, err := runClock(t, f.ep, clk, "restore", "demo", "--snapshot", "demo-1", "--name", "r-"+strings.ToLower(policy), "--policy", policy); err != nil {
			t.Fatal(err)
		}
		if got := f.restores.lastCreated().GetSpec().GetTargetReadinessPolicy(); got != policy {
			t.Errorf("--policy %s sent %q", policy, got)
		}
	}
}

func TestRestoreRefusals(t *testing.T) {
	f := startSnapshotFake(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"restore", "demo"}, `required flag(s) "snapshot" not set`},
		{[]string{"restore", "demo", "--snapshot", ""}, "--snapshot must not be empty"},
		{[]string{"restore", "demo", "--snapshot", "s", "--policy", "Stop"},
			`--policy "Stop": want one of WaitGracePeriod, StopTarget, FailImmediate, WaitEventually`},
		{[]string{"restore", "demo", "--snapshot", "s", "--wait", "--timeout", "-1s"}, "--timeout must be positive, got -1s"},
		{[]string{"restore", "--snapshot", "s"}, "accepts 1 arg(s), received 0"},
	} {
		_, _, err := run(t, f.ep, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	if n := len(f.restores.created); n != 0 {
		t.Errorf("refused commands created %d restores", n)
	}
}

func restoreStatus(change func(*apiv1.VirtualMachineRestoreStatus)) func(*apiv1.VirtualMachineRestore) {
	return func(r *apiv1.VirtualMachineRestore) {
		if r.Status == nil {
			r.Status = &apiv1.VirtualMachineRestoreStatus{}
		}
		change(r.Status)
	}
}

func TestRestoreWaitSucceeds(t *testing.T) {
	f := startSnapshotFake(t)
	stdout, stderr, done := startWait(t, f.ep, f.restores.watchers, "restore", "demo-copy", "--snapshot", "demo-1", "--name", "r1", "--wait")
	f.restores.update("default", "r1", restoreStatus(func(st *apiv1.VirtualMachineRestoreStatus) {
		st.Phase, st.Message = apiv1.RestorePending, "waiting for VM demo-copy to stop (WaitGracePeriod)"
	}))
	f.restores.update("default", "r1", restoreStatus(func(st *apiv1.VirtualMachineRestoreStatus) {
		st.Phase, st.Message, st.NodeName, st.TargetCreated = apiv1.RestoreStaging, "copying volume data (1/2)", "node-a", true
	}))
	f.restores.update("default", "r1", restoreStatus(func(st *apiv1.VirtualMachineRestoreStatus) {
		st.Message = "copying volume data (2/2)"
	}))
	testutil.Eventually(t, 10*time.Second, "the second copy", func() bool { return strings.Contains(stderr.String(), "(2/2)") })
	f.restores.breakWatches()
	f.restores.update("default", "r1", restoreStatus(func(st *apiv1.VirtualMachineRestoreStatus) {
		st.Phase, st.Message, st.Staged = apiv1.RestoreCommitting, "", true
	}))
	testutil.Eventually(t, 10*time.Second, "the watch to be opened again", func() bool { return f.restores.watchesOpened() == 2 })
	f.restores.update("default", "r1", restoreStatus(func(st *apiv1.VirtualMachineRestoreStatus) {
		st.Phase, st.Complete, st.Swapped, st.SpecRestored = apiv1.RestoreSucceeded, true, true, true
		st.Restores = []*apiv1.VolumeRestore{{VolumeName: "root"}, {VolumeName: "data"}}
	}))
	if err := waitCommand(t, done); err != nil {
		t.Fatalf("restore --wait: %v\n%s", err, stderr)
	}
	if want := "restore r1 of VM demo-copy from snapshot demo-1 created\n" +
		"VM demo-copy restored from snapshot demo-1, 2 volumes (restore r1)\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout, want)
	}
	want := "Pending\n" +
		"Pending (waiting for VM demo-copy to stop (WaitGracePeriod))\n" +
		"Staging (copying volume data (1/2))\n" +
		"  node: node-a\n" +
		"  VM demo-copy is new, made from the snapshot\n" +
		"Staging (copying volume data (2/2))\n" +
		"Committing\n" +
		"Succeeded\n"
	if stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
	}
}

func TestRestoreWaitFails(t *testing.T) {
	f := startSnapshotFake(t)
	_, _, done := startWait(t, f.ep, f.restores.watchers, "restore", "demo", "--snapshot", "demo-1", "--name", "r1", "--wait")
	f.restores.update("default", "r1", restoreStatus(func(st *apiv1.VirtualMachineRestoreStatus) {
		st.Phase, st.Error = apiv1.RestoreFailed, "VM demo did not stop within 5m0s (WaitGracePeriod)"
	}))
	err := waitCommand(t, done)
	if want := "restore r1 of VM demo from snapshot demo-1 failed: VM demo did not stop within 5m0s (WaitGracePeriod); the VM is as it was"; err == nil || err.Error() != want {
		t.Errorf("err %v, want %q", err, want)
	}
}
