package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestValidateMigration(t *testing.T) {
	ok := &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web-migration-abcde"},
		Spec:     &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: "web", AddedNodeSelector: map[string]string{apiv1.LabelNodeName: "node-b"}},
	}
	if errs := ValidateMigration(ok); len(errs) > 0 {
		t.Fatalf("valid migration refused: %v", errs)
	}
	bad := &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "m"},
		Spec:     &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: "Not_A_Name", AddedNodeSelector: map[string]string{"bad key!": "x"}},
	}
	got := fields(ValidateMigration(bad))
	for _, want := range []string{"spec.vmi_name", "spec.added_node_selector"} {
		if !strings.Contains(got, want) {
			t.Errorf("errors %s do not name %s", got, want)
		}
	}
}

func TestValidateMigrationState(t *testing.T) {
	st := &apiv1.VirtualMachineInstanceStatus{MigrationState: &apiv1.MigrationState{
		TargetLibvirtUri: "qemu+tls://10.0.0.2:16514/system", TargetNodeAddress: "not-an-ip", Mode: "Sideways", AbortStatus: "Maybe", Method: "Teleport",
		TargetDomainXml: strings.Repeat("x", maxDomainXML+1),
	}}
	got := fields(ValidateVirtualMachineInstanceStatus(st, field.NewPath("status")))
	for _, want := range []string{"target_node_address", "mode", "abort_status", "method", "target_domain_xml"} {
		if !strings.Contains(got, "status.migration_state."+want) {
			t.Errorf("errors %s do not name migration_state.%s", got, want)
		}
	}
}

// TestValidateMigrationDestination: a migration state's destination gets
// bounds here, each error naming its field; what it may be is the
// server's alone (no API caller changes it: apiserver's
// TestNoCallerChangesTheDestination has the destinations once refused
// here), and the source checks it before use (migrationdest.Validate).
func TestValidateMigrationDestination(t *testing.T) {
	const uri, addr = "qemu+tls://10.0.0.2:16514/system", "10.0.0.2"
	for _, tc := range []struct {
		name, uri, addr string
		completed       bool
		want            string // "" valid, else the field
	}{
		{"none yet", "", "", false, ""},
		{"the server's", uri, addr, false, ""},
		{"tcp", "qemu+tcp://10.0.0.2:16509/system", addr, false, ""},
		{"history", "qemu+ssh://root@node-b/system", addr, true, ""},
		{"history with a control character", "qemu+ssh://node-b/system\n", addr, true, "target_libvirt_uri"},
	} {
		st := &apiv1.VirtualMachineInstanceStatus{MigrationState: &apiv1.MigrationState{
			TargetLibvirtUri: tc.uri, TargetNodeAddress: tc.addr, Completed: tc.completed}}
		got := fields(ValidateVirtualMachineInstanceStatus(st, field.NewPath("status")))
		if want := "status.migration_state." + tc.want; (tc.want == "") != (got == "") || (tc.want != "" && got != want) {
			t.Errorf("%s: errors %q, want %q", tc.name, got, tc.want)
		}
	}
}

func fields(errs field.ErrorList) string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field)
	}
	return strings.Join(out, ",")
}
