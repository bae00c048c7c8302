package apiserver

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// runningInstance stores a running instance of VM name on node a.
func (f *fixture) runningInstance(t *testing.T, name string, mut func(*apiv1.VirtualMachineInstance)) *apiv1.VirtualMachineInstance {
	t.Helper()
	v := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{apiv1.LabelNodeName: "a"}},
		Spec:     validVM(name).Spec.Template.Spec,
		Status:   &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning, NodeName: "a"},
	}
	if mut != nil {
		mut(v)
	}
	out, err := f.st.VMIs.Create(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCreateMigration(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	migs := apiv1.NewMigrationsClient(f.conn)
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")}); err != nil {
		t.Fatal(err)
	}
	f.runningInstance(t, "web", nil)
	f.runningInstance(t, "paused", func(v *apiv1.VirtualMachineInstance) { v.Spec.Paused = true })
	f.runningInstance(t, "efi", func(v *apiv1.VirtualMachineInstance) {
		v.Spec.Domain.Firmware = &apiv1.Firmware{Bootloader: &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{SecureBoot: true}}}
	})
	f.runningInstance(t, "blocked", func(v *apiv1.VirtualMachineInstance) {
		v.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionLiveMigratable, Status: apiv1.ConditionFalse, Reason: "Because", Message: "the node says so"}}
	})
	f.runningInstance(t, "starting", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseScheduled })

	for vmi, want := range map[string]string{
		"":         "spec.vmi_name",
		"nope":     `"default/nope" does not exist`,
		"paused":   apiv1.ReasonPausedNotLiveMigratable,
		"blocked":  "Because: the node says so",
		"starting": "not running",
	} {
		_, err := migs.Create(ctx, &apiv1.CreateMigrationRequest{Migration: &apiv1.VirtualMachineInstanceMigration{
			Spec: &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: vmi}}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("migrate %q: %v; want an error saying %q", vmi, err, want)
		}
	}
	// EFI firmware, Secure Boot included, migrates: its NVRAM goes along.
	if _, err := migs.Create(ctx, &apiv1.CreateMigrationRequest{Migration: &apiv1.VirtualMachineInstanceMigration{
		Spec: &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: "efi"}}}); err != nil {
		t.Errorf("migrate an EFI guest: %v", err)
	}

	// VMs.Migrate names it after the VM and passes the selector.
	m, err := f.vms.Migrate(ctx, &apiv1.MigrateVirtualMachineRequest{Key: webKey, AddedNodeSelector: map[string]string{apiv1.LabelNodeName: "b"}})
	if err != nil {
		t.Fatal(err)
	}
	md := m.GetMetadata()
	if !strings.HasPrefix(md.GetName(), "web-migration-") || md.GetLabels()[apiv1.LabelMigrationVMIName] != "web" ||
		len(md.GetFinalizers()) != 1 || md.GetFinalizers()[0] != apiv1.FinalizerMigration ||
		m.GetSpec().GetAddedNodeSelector()[apiv1.LabelNodeName] != "b" {
		t.Fatalf("created migration = %v", m)
	}
	// One at a time.
	if _, err := f.vms.Migrate(ctx, &apiv1.MigrateVirtualMachineRequest{Key: webKey}); code(err) != codes.FailedPrecondition ||
		!strings.Contains(err.Error(), md.GetName()+" is already in progress") {
		t.Fatalf("second migration: %v", err)
	}
	// Delete cancels: the object stays, marked, until the controller let it go.
	del, err := migs.Delete(ctx, &apiv1.DeleteMigrationRequest{Key: &apiv1.ObjectKey{Name: md.GetName()}})
	if err != nil || del.GetMetadata().GetDeletionTimestamp() == nil {
		t.Fatalf("delete = %v, %v; want it kept with a deletion timestamp", del, err)
	}
	list, err := migs.List(ctx, &apiv1.ListMigrationsRequest{Options: &apiv1.ListOptions{LabelSelector: apiv1.LabelMigrationVMIName + "=web"}})
	if err != nil || len(list.GetItems()) != 1 {
		t.Fatalf("list = %v, %v", list, err)
	}
	if _, err := f.vms.Migrate(ctx, &apiv1.MigrateVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "stopped"}}); code(err) != codes.NotFound {
		t.Fatalf("migrate a VM that does not exist: %v", err)
	}
}

// TestNodeStatusWritesDuringMigration: who may write what of a migrating
// instance's status.
func TestNodeStatusWritesDuringMigration(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	svc := newVMIService(f.srv)
	handoff := &apiv1.MigrationState{MigrationUid: "6f1c2a3e-0000-4000-8000-0000000000a1", SourceNode: "a", TargetNode: "b",
		Method: apiv1.MigrationMethodBlock, Configuration: &apiv1.MigrationConfiguration{ProgressTimeoutSeconds: 150},
		TargetLibvirtUri: "qemu+tls://10.0.0.2:16514/system", TargetNodeAddress: "10.0.0.2"}
	f.runningInstance(t, "web", func(v *apiv1.VirtualMachineInstance) {
		v.Metadata.Labels[apiv1.LabelMigrationTargetNode] = "b"
		v.Status.MigrationState = handoff
	})
	write := func(node string, mut func(*apiv1.VirtualMachineInstance)) error {
		cur, err := f.st.VMIs.Get(ctx, "default", "web")
		if err != nil {
			t.Fatal(err)
		}
		next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
		mut(next)
		_, err = svc.UpdateStatus(WithIdentity(ctx, Identity{Kind: Node, Node: node}), &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: next})
		return err
	}
	now := timestamppb.New(f.now)
	for _, tc := range []struct {
		name, node string
		mut        func(*apiv1.VirtualMachineInstance)
		want       string // "" allowed, else part of the refusal
	}{
		// Where it receives is the server's: the source's libvirtd opens
		// it as root (ext's command= runs a program).
		{"target names its own destination", "b", func(v *apiv1.VirtualMachineInstance) {
			st := v.Status.MigrationState
			st.TargetLibvirtUri, st.TargetNodeAddress = "qemu+ext://10.0.0.2/system?command=/tmp/x", "10.0.0.2"
			st.TargetReadyTimestamp, st.TargetDomainXml = now, "<domain/>"
		}, "status.migration_state.target_libvirt_uri: node b may not change it"},
		{"target names another address", "b", func(v *apiv1.VirtualMachineInstance) {
			v.Status.MigrationState.TargetNodeAddress = "10.0.0.9"
		}, "status.migration_state.target_node_address: node b may not change it"},
		{"target clears the destination", "b", func(v *apiv1.VirtualMachineInstance) {
			v.Status.MigrationState.TargetLibvirtUri, v.Status.MigrationState.TargetNodeAddress = "", ""
		}, "status.migration_state.target_libvirt_uri"},
		{"source names another destination", "a", func(v *apiv1.VirtualMachineInstance) {
			v.Status.MigrationState.TargetLibvirtUri = "qemu+tcp://10.0.0.2:16509/system"
		}, "status.migration_state.target_libvirt_uri: node a may not change it"},
		{"target reports ready", "b", func(v *apiv1.VirtualMachineInstance) {
			st := v.Status.MigrationState
			st.TargetReadyTimestamp, st.TargetDomainXml = now, "<domain/>"
		}, ""},
		{"target touches the phase", "b", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseFailed }, "only the migration state's target fields"},
		{"target claims the instance", "b", func(v *apiv1.VirtualMachineInstance) { v.Status.NodeName = "b" }, "target fields"},
		{"source moves it before the end", "a", func(v *apiv1.VirtualMachineInstance) { v.Status.NodeName = "b" }, "only to a completed migration's target"},
		{"source moves it elsewhere", "a", func(v *apiv1.VirtualMachineInstance) {
			v.Status.NodeName, v.Status.MigrationState.Completed = "c", true
		}, "only to a completed migration's target"},
		{"source changes the settings", "a", func(v *apiv1.VirtualMachineInstance) {
			v.Status.MigrationState.Configuration.BandwidthMibPerSecond = 1
		}, "are the controller's"},
		{"source clears the abort request", "a", func(v *apiv1.VirtualMachineInstance) { v.Status.MigrationState = nil }, "are the controller's"},
		{"a third node", "c", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseFailed }, "may update only its own"},
		{"source starts and reports progress", "a", func(v *apiv1.VirtualMachineInstance) {
			v.Status.MigrationState.StartTimestamp = now
			v.Status.MigrationState.Progress = &apiv1.MigrationProgress{DataRemainingBytes: 1}
		}, ""},
		{"target fails after the start", "b", func(v *apiv1.VirtualMachineInstance) {
			v.Status.MigrationState.Failed, v.Status.MigrationState.Completed = true, true
		}, "target fields"},
		{"source hands it over with the end", "a", func(v *apiv1.VirtualMachineInstance) {
			v.Status.NodeName = "b"
			v.Status.MigrationState.Completed, v.Status.MigrationState.EndTimestamp = true, now
		}, ""},
		{"old source afterwards", "a", func(v *apiv1.VirtualMachineInstance) { v.Status.Phase = apiv1.PhaseFailed }, "may update only its own"},
		{"new owner reports", "b", func(v *apiv1.VirtualMachineInstance) { v.Status.Reason = "fine" }, ""},
	} {
		err := write(tc.node, tc.mut)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v; want PermissionDenied saying %q", tc.name, err, tc.want)
		}
	}
	// Nor an admin through the API: the controller writes it, through the
	// store.
	cur, err := f.st.VMIs.Get(ctx, "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
	next.Status.MigrationState.TargetLibvirtUri = "qemu+tcp://10.0.0.2:16509/system"
	_, err = svc.UpdateStatus(WithIdentity(ctx, Identity{Kind: Admin}), &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: next})
	if code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "status.migration_state.target_libvirt_uri: admin may not change it") {
		t.Errorf("admin changes the destination: %v; want PermissionDenied", err)
	}
}

// TestNoCallerChangesTheDestination: no caller, admin or node, writes a
// migration's destination through the API, whatever it is: refused
// PermissionDenied, naming each field it changes. (These destinations,
// the ext transport's command among them, were once refused by value in
// validation; no value needs judging when none can be written.)
func TestNoCallerChangesTheDestination(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	svc := newVMIService(f.srv)
	const uri, addr = "qemu+tls://10.0.0.2:16514/system", "10.0.0.2"
	f.runningInstance(t, "web", func(v *apiv1.VirtualMachineInstance) {
		v.Metadata.Labels[apiv1.LabelMigrationTargetNode] = "b"
		v.Status.MigrationState = &apiv1.MigrationState{MigrationUid: "6f1c2a3e-0000-4000-8000-0000000000a2", SourceNode: "a", TargetNode: "b",
			Method: apiv1.MigrationMethodLive, TargetLibvirtUri: uri, TargetNodeAddress: addr}
	})
	callers := []Identity{{Kind: Admin}, {Kind: Node, Node: "a"}, {Kind: Node, Node: "b"}}
	for _, tc := range []struct {
		name, uri, addr string
		completed       bool
		want            []string // the fields named
	}{
		{"ext runs a command", "qemu+ext:///system?command=/tmp/x", addr, false, []string{"target_libvirt_uri"}},
		{"a query", uri + "?no_verify=1", addr, false, []string{"target_libvirt_uri"}},
		{"another host", "qemu+tls://10.0.0.3:16514/system", addr, false, []string{"target_libvirt_uri"}},
		{"a loopback address", "qemu+tls://127.0.0.1:16514/system", "127.0.0.1", false, []string{"target_libvirt_uri", "target_node_address"}},
		{"a URI alone", uri, "", false, []string{"target_node_address"}},
		{"an address alone", "", addr, false, []string{"target_libvirt_uri"}},
		{"history with a control character", "qemu+ssh://node-b/system\n", addr, true, []string{"target_libvirt_uri"}},
	} {
		for _, id := range callers {
			cur, err := f.st.VMIs.Get(ctx, "default", "web")
			if err != nil {
				t.Fatal(err)
			}
			next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
			st := next.Status.MigrationState
			st.TargetLibvirtUri, st.TargetNodeAddress, st.Completed = tc.uri, tc.addr, tc.completed
			_, err = svc.UpdateStatus(WithIdentity(ctx, id), &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: next})
			if code(err) != codes.PermissionDenied {
				t.Errorf("%s, as %s: %v; want PermissionDenied", tc.name, id, err)
				continue
			}
			for _, fld := range tc.want {
				if want := "status.migration_state." + fld + ": " + id.String() + " may not change it"; !strings.Contains(err.Error(), want) {
					t.Errorf("%s, as %s: %v; want it saying %q", tc.name, id, err, want)
				}
			}
		}
	}
	if v, err := f.st.VMIs.Get(ctx, "default", "web"); err != nil || v.GetStatus().GetMigrationState().GetTargetLibvirtUri() != uri ||
		v.GetStatus().GetMigrationState().GetTargetNodeAddress() != addr {
		t.Fatalf("destination after the refused writes: %v, %v", v.GetStatus().GetMigrationState(), err)
	}
}
