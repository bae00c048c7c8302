package command

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestCloneRequest(t *testing.T) {
	f := startSnapshotFake(t)
	clk := clocktesting.NewFakeClock(snapNow)

	out, _, err := runClock(t, f.ep, clk, "clone", "demo", "demo-copy")
	if err != nil {
		t.Fatal(err)
	}
	if want := "clone demo-copy-clone-20250102030405 of VM demo into VM demo-copy created\n"; out != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	want := &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "demo-copy-clone-20250102030405"},
		Spec:     &apiv1.VirtualMachineCloneSpec{SourceKind: apiv1.CloneSourceVM, SourceName: "demo", Target: "demo-copy"},
	}
	if got := f.clones.lastCreated(); !proto.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}

	out, _, err = runClock(t, f.ep, clk, "clone", "demo-1", "web-2", "--from-snapshot", "--name", "c2",
		"--mac", "default=02:00:00:00:00:02", "--mac", "storage=02:00:00:00:00:03",
		"--label", "app=web", "--label", "tier=front", "--annotation", "owner=ops")
	if err != nil {
		t.Fatal(err)
	}
	if want := "clone c2 of snapshot demo-1 into VM web-2 created\n"; out != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	want = &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "c2"},
		Spec: &apiv1.VirtualMachineCloneSpec{
			SourceKind: apiv1.CloneSourceSnapshot, SourceName: "demo-1", Target: "web-2",
			NewMacAddresses: map[string]string{"default": "02:00:00:00:00:02", "storage": "02:00:00:00:00:03"},
			Labels:          map[string]string{"app": "web", "tier": "front"},
			Annotations:     map[string]string{"owner": "ops"},
		},
	}
	if got := f.clones.lastCreated(); !proto.Equal(got, want) {
		t.Errorf("created %v, want %v", got, want)
	}
}

func TestCloneRefusals(t *testing.T) {
	f := startSnapshotFake(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--mac", "default"}, `invalid argument "default" for "--mac" flag`},
		{[]string{"--mac", "default=02:00:00:00:00"}, "--mac default=02:00:00:00:00: not a MAC address such as 02:00:00:00:00:01"},
		{[]string{"--mac", "default=zz:00:00:00:00:01"}, "--mac default=zz:00:00:00:00:01: not a MAC address"},
		{[]string{"--mac", "default=01:00:5e:00:00:01"}, "--mac default=01:00:5e:00:00:01: not a unicast MAC address"},
		{[]string{"--mac", "default=00:00:00:00:00:00"}, "--mac default=00:00:00:00:00:00: must not be all zeros"},
		{[]string{"--mac", "=02:00:00:00:00:01"}, `--mac "=02:00:00:00:00:01": want INTERFACE=MAC, the interface name is empty`},
		{[]string{"--mac", "a=02:00:00:00:00:01", "--mac", "b=02-00-00-00-00-01"}, "--mac b=02-00-00-00-00-01: the same address as interface a"},
		{[]string{"--label", "app"}, `invalid argument "app" for "--label" flag`},
		{[]string{"--wait", "--timeout", "0s"}, "--timeout must be positive, got 0s"},
	} {
		_, _, err := run(t, f.ep, append([]string{"clone", "demo", "demo-copy"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
	if _, _, err := run(t, f.ep, "clone", "demo"); err == nil || !strings.Contains(err.Error(), "accepts 2 arg(s), received 1") {
		t.Errorf("clone with one name: %v", err)
	}
	if n := len(f.clones.created); n != 0 {
		t.Errorf("refused commands created %d clones", n)
	}
}

func cloneStatus(change func(*apiv1.VirtualMachineCloneStatus)) func(*apiv1.VirtualMachineClone) {
	return func(c *apiv1.VirtualMachineClone) {
		if c.Status == nil {
			c.Status = &apiv1.VirtualMachineCloneStatus{}
		}
		change(c.Status)
	}
}

func TestCloneWait(t *testing.T) {
	t.Run("succeeds", func(t *testing.T) {
		f := startSnapshotFake(t)
		stdout, stderr, done := startWait(t, f.ep, f.clones.watchers, "clone", "demo", "demo-copy", "--name", "c1", "--wait")
		snap, restore := apiv1.CloneSnapshotName("clone-uid-1"), apiv1.CloneRestoreName("clone-uid-1")
		f.clones.update("default", "c1", cloneStatus(func(st *apiv1.VirtualMachineCloneStatus) {
			st.Phase, st.SnapshotName = apiv1.CloneSnapshotInProgress, snap
			st.Conditions = []*apiv1.Condition{{Type: "Progressing", Status: "True", Reason: "SnapshotInProgress", Message: "snapshot " + snap + " is InProgress"}}
		}))
		f.clones.update("default", "c1", cloneStatus(func(st *apiv1.VirtualMachineCloneStatus) {
			st.Phase, st.RestoreName, st.Conditions = apiv1.CloneRestoreInProgress, restore, nil
		}))
		f.clones.update("default", "c1", cloneStatus(func(st *apiv1.VirtualMachineCloneStatus) {
			st.Phase, st.TargetUid = apiv1.CloneSucceeded, "vm-uid"
		}))
		if err := waitCommand(t, done); err != nil {
			t.Fatalf("clone --wait: %v\n%s", err, stderr)
		}
		if want := "clone c1 of VM demo into VM demo-copy created\n" +
			"VM demo-copy cloned from VM demo (clone c1); it is halted: `virtplane-agent start demo-copy` starts it\n"; stdout.String() != want {
			t.Errorf("stdout %q, want %q", stdout, want)
		}
		want := "Pending\n" +
			"SnapshotInProgress (SnapshotInProgress: snapshot " + snap + " is InProgress)\n" +
			"  snapshot: " + snap + "\n" +
			"RestoreInProgress\n" +
			"  restore: " + restore + "\n" +
			"Succeeded\n"
		if stderr.String() != want {
			t.Errorf("stderr:\n%s\nwant:\n%s", stderr, want)
		}
	})
	t.Run("fails", func(t *testing.T) {
		f := startSnapshotFake(t)
		_, _, done := startWait(t, f.ep, f.clones.watchers, "clone", "demo-1", "demo-copy", "--from-snapshot", "--name", "c1", "--wait")
		f.clones.update("default", "c1", cloneStatus(func(st *apiv1.VirtualMachineCloneStatus) {
			st.Phase, st.Error = apiv1.CloneFailed, `target VM "demo-copy" already exists`
		}))
		err := waitCommand(t, done)
		if want := `clone c1 of snapshot demo-1 into VM demo-copy failed: target VM "demo-copy" already exists`; err == nil || err.Error() != want {
			t.Errorf("err %v, want %q", err, want)
		}
	})
}
