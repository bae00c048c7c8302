package provider

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestSnapshotModelRoundTrip(t *testing.T) {
	plan := snapshotModel{
		Namespace: types.StringValue("prod"), Name: types.StringValue("before"), VirtualMachine: types.StringValue("db"),
		DeletionPolicy: types.StringValue(apiv1.DeletionPolicyRetain), FailureDeadline: types.StringValue("300s"),
	}
	s, d := snapshotFromModel(context.Background(), &plan)
	if d.HasError() {
		t.Fatal(d)
	}
	if s.GetSpec().GetFailureDeadlineSeconds() != 300 || s.GetSpec().GetSource() != "db" || s.GetSpec().GetDeletionPolicy() != "Retain" {
		t.Fatalf("snapshotFromModel = %v", s)
	}
	created := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Metadata.Uid = "u1"
	s.Status = &apiv1.VirtualMachineSnapshotStatus{
		Phase: apiv1.SnapshotSucceeded, ReadyToUse: true, CreationTime: timestamppb.New(created),
		Indications: []string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent}, IncludedVolumes: []string{"data"},
		NodeName: "n1", ContentName: apiv1.SnapshotContentName("u1"),
	}
	m, d := snapshotToModel(s, &plan)
	if d.HasError() {
		t.Fatal(d)
	}
	if m.FailureDeadline.ValueString() != "300s" {
		t.Errorf("failure_deadline %s: the plan's spelling of the same time is kept", m.FailureDeadline)
	}
	if m.CreationTime.ValueString() != "2025-01-02T03:04:05Z" || m.ID.ValueString() != "prod/before" || !m.ReadyToUse.ValueBool() {
		t.Errorf("snapshotToModel = %+v", m)
	}
	if len(m.Indications.Elements()) != 2 || len(m.IncludedVolumes.Elements()) != 1 {
		t.Errorf("lists: %s %s", m.Indications, m.IncludedVolumes)
	}
	if m.ExcludedVolumes.IsNull() || len(m.ExcludedVolumes.Elements()) != 0 {
		t.Errorf("no excluded volumes is an empty list, not %s", m.ExcludedVolumes)
	}

	// Import (no prior) and an API default: the shortest spelling.
	s.Spec.FailureDeadlineSeconds = nil
	s.Spec.DeletionPolicy = ""
	m, _ = snapshotToModel(s, nil)
	if m.FailureDeadline.ValueString() != defaultFailureDeadline || m.DeletionPolicy.ValueString() != apiv1.DeletionPolicyDelete {
		t.Errorf("defaults read back as %s, %s", m.FailureDeadline, m.DeletionPolicy)
	}
	if p, ok := snapshotAttributePath("spec.source"); !ok || !p.Equal(path.Root("virtual_machine")) {
		t.Errorf("spec.source maps to %s", p)
	}
}
