package validation

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func validVMIStatus() *apiv1.VirtualMachineInstanceStatus {
	return &apiv1.VirtualMachineInstanceStatus{
		Phase: apiv1.PhaseRunning,
		PhaseTransitionTimestamps: []*apiv1.PhaseTransitionTimestamp{
			{Phase: apiv1.PhaseScheduled, Time: timestamppb.Now()}, {Phase: apiv1.PhaseRunning, Time: timestamppb.Now()}},
		Conditions: []*apiv1.Condition{
			{Type: "Ready", Status: apiv1.ConditionTrue, Reason: "GuestRunning"},
			{Type: "Synchronized", Status: apiv1.ConditionFalse, Reason: "SyncFailed",
				Message: "internal error: process exited while connecting to monitor:\n\tqemu: could not load kernel"},
		},
		NodeName:   "node-1.example.com",
		Interfaces: []*apiv1.InterfaceStatus{{Name: "default", MacAddress: "02:00:00:00:00:01", IpAddress: "10.0.2.15", IpAddresses: []string{"10.0.2.15", "fec0::5054:ff:fe12:3456"}}},
		DomainUuid: goodUID,
	}
}

func TestValidateVirtualMachineInstanceStatus(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(st *apiv1.VirtualMachineInstanceStatus)
		want   []want
	}{
		{"valid", func(*apiv1.VirtualMachineInstanceStatus) {}, nil},
		{"unknown phase", func(st *apiv1.VirtualMachineInstanceStatus) { st.Phase = "Hacked" }, []want{notSupported("status.phase")}},
		{"unknown transition phase", func(st *apiv1.VirtualMachineInstanceStatus) { st.PhaseTransitionTimestamps[0].Phase = "x" },
			[]want{notSupported("status.phase_transition_timestamps[0].phase")}},
		{"too many transitions", func(st *apiv1.VirtualMachineInstanceStatus) {
			for range maxPhaseTransitions {
				st.PhaseTransitionTimestamps = append(st.PhaseTransitionTimestamps, &apiv1.PhaseTransitionTimestamp{Phase: apiv1.PhaseRunning})
			}
		}, []want{tooMany("status.phase_transition_timestamps")}},
		{"condition status", func(st *apiv1.VirtualMachineInstanceStatus) { st.Conditions[0].Status = "Yes" },
			[]want{notSupported("status.conditions[0].status")}},
		{"condition without type", func(st *apiv1.VirtualMachineInstanceStatus) { st.Conditions[0].Type = "" },
			[]want{required("status.conditions[0].type")}},
		{"duplicate condition", func(st *apiv1.VirtualMachineInstanceStatus) { st.Conditions[1].Type = "Ready" },
			[]want{duplicate("status.conditions[1].type")}},
		{"huge message", func(st *apiv1.VirtualMachineInstanceStatus) {
			st.Conditions[1].Message = strings.Repeat("m", MaxStatusMessageLen+1)
		},
			[]want{tooLong("status.conditions[1].message")}},
		{"escape in message", func(st *apiv1.VirtualMachineInstanceStatus) { st.Message = "\x1b[2J" }, []want{invalid("status.message")}},
		{"too many conditions", func(st *apiv1.VirtualMachineInstanceStatus) {
			for i := range maxConditions {
				st.Conditions = append(st.Conditions, &apiv1.Condition{Type: strings.Repeat("c", i+1), Status: apiv1.ConditionTrue})
			}
		}, []want{tooMany("status.conditions")}},
		{"node name", func(st *apiv1.VirtualMachineInstanceStatus) { st.NodeName = "../node" }, []want{invalid("status.node_name")}},
		{"ip", func(st *apiv1.VirtualMachineInstanceStatus) { st.Interfaces[0].IpAddresses[1] = "not an ip" },
			[]want{invalid("status.interfaces[0].ip_addresses[1]")}},
		{"mac", func(st *apiv1.VirtualMachineInstanceStatus) { st.Interfaces[0].MacAddress = "x" }, []want{invalid("status.interfaces[0].mac_address")}},
		{"domain uuid", func(st *apiv1.VirtualMachineInstanceStatus) { st.DomainUuid = "../x" }, []want{invalid("status.domain_uuid")}},
		{"migration", func(st *apiv1.VirtualMachineInstanceStatus) {
			st.MigrationState = &apiv1.MigrationState{MigrationUid: "x", SourceNode: "A B"}
		}, []want{invalid("status.migration_state.migration_uid"), invalid("status.migration_state.source_node")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := validVMIStatus()
			tc.mutate(st)
			expectErrors(t, ValidateVirtualMachineInstanceStatus(st, field.NewPath("status")), tc.want...)
		})
	}
}

func TestClipStatusMessage(t *testing.T) {
	for _, s := range []string{"ok\n\tfine", strings.Repeat("é", MaxStatusMessageLen), "\x1b[2J\xff\x00", ""} {
		c := ClipStatusMessage(s)
		if errs := validateStatusMessage(c, field.NewPath("m")); len(errs) > 0 || !utf8.ValidString(c) {
			t.Errorf("ClipStatusMessage(%.20q) = %.20q, refused: %v", s, c, errs)
		}
	}
	if got := ClipStatusMessage("ok\n\tfine"); got != "ok\n\tfine" {
		t.Errorf("a valid message changed: %q", got)
	}
}
