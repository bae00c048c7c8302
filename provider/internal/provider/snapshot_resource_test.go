package provider

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestSnapshotSchemasDocumentEveryAttribute(t *testing.T) {
	rs := documentedResource(t, NewSnapshotResource())
	ds := documentedDataSource(t, NewSnapshotDataSource())
	mirrorsResource(t, rs, ds)
	documentedResource(t, NewRestoreResource())

	// The spec is immutable: every argument replaces the snapshot.
	for _, name := range []string{"name", "namespace", "virtual_machine", "deletion_policy", "failure_deadline"} {
		if !requiresReplace(rs.Attributes[name].(interface {
			StringPlanModifiers() []planmodifier.String
		}).StringPlanModifiers()) {
			t.Errorf("snapshot %s does not require replacement", name)
		}
	}
}

// requiresReplace reports whether one of mods is a RequiresReplace.
func requiresReplace(mods []planmodifier.String) bool {
	for _, m := range mods {
		if strings.Contains(m.Description(context.Background()), "destroy and recreate") {
			return true
		}
	}
	return false
}

func TestFailureDeadline(t *testing.T) {
	for _, c := range []struct {
		in   string
		secs int64
		err  string
	}{
		{"5m", 300, ""}, {"300s", 300, ""}, {"0s", 0, ""}, {"0", 0, ""}, {"1h30m", 5400, ""}, {"168h", 604800, ""},
		{"-1s", 0, "negative"}, {"1500ms", 0, "whole seconds"}, {"169h", 0, "at most 168h"}, {"5 minutes", 0, "not a Go duration"},
	} {
		secs, err := parseDeadline(c.in)
		switch {
		case c.err == "" && (err != nil || secs != c.secs):
			t.Errorf("parseDeadline(%q) = %d, %v; want %d", c.in, secs, err, c.secs)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("parseDeadline(%q) error %v, want one saying %q", c.in, err, c.err)
		}
		if ok, _ := validString(failureDeadlineValidator(), c.in); ok != (c.err == "") {
			t.Errorf("validator accepts %q: %v", c.in, ok)
		}
	}
	for secs, want := range map[int64]string{300: "5m", 0: "0s", 90: "1m30s", 3600: "1h", 5400: "1h30m", 3601: "1h0m1s"} {
		if got := formatDeadline(secs); got != want {
			t.Errorf("formatDeadline(%d) = %q, want %q", secs, got, want)
		}
		if back, err := parseDeadline(formatDeadline(secs)); err != nil || back != secs {
			t.Errorf("formatDeadline(%d) does not parse back: %d, %v", secs, back, err)
		}
	}
	if !sameDeadline("5m", "300s") || sameDeadline("5m", "6m") || sameDeadline("x", "x") {
		t.Error("sameDeadline compares durations, and nothing invalid")
	}
}

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

func TestJudgeSnapshot(t *testing.T) {
	snap := func(phase string, ready bool, errText string) *apiv1.VirtualMachineSnapshot {
		return &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Name: "s"},
			Status: &apiv1.VirtualMachineSnapshotStatus{Phase: phase, ReadyToUse: ready, Error: errText,
				Conditions: []*apiv1.Condition{{Type: "Progressing", Status: "False", Reason: "SourceLocked", Message: "Source not locked: restore r"}}}}
	}
	if v := judgeSnapshot(snap(apiv1.SnapshotInProgress, false, "")); v.done || v.err != nil || !strings.Contains(v.state, "Source not locked: restore r") {
		t.Errorf("in progress: %+v", v)
	}
	if v := judgeSnapshot(snap(apiv1.SnapshotSucceeded, false, "")); v.done {
		t.Error("succeeded but not ready to use is not done")
	}
	if v := judgeSnapshot(snap(apiv1.SnapshotSucceeded, true, "")); !v.done || v.err != nil {
		t.Errorf("succeeded: %+v", v)
	}
	if v := judgeSnapshot(snap(apiv1.SnapshotFailed, false, "snapshot deadline exceeded")); v.err == nil ||
		v.err.Error() != "the snapshot failed: snapshot deadline exceeded" {
		t.Errorf("failed: %+v", v)
	}
	deleting := snap(apiv1.SnapshotInProgress, false, "")
	deleting.Metadata.DeletionTimestamp = timestamppb.Now()
	if v := judgeSnapshot(deleting); v.err == nil {
		t.Error("a snapshot being deleted ends the wait")
	}
}

func TestJudgeRestoreAndClone(t *testing.T) {
	restore := func(phase string, complete bool, errText string) *apiv1.VirtualMachineRestore {
		return &apiv1.VirtualMachineRestore{Metadata: &apiv1.ObjectMeta{Name: "r"},
			Status: &apiv1.VirtualMachineRestoreStatus{Phase: phase, Complete: complete, Error: errText, Message: "copying volume data (1/2)"}}
	}
	if v := judgeRestore(restore(apiv1.RestoreStaging, false, "disk full")); v.done || v.err != nil ||
		!strings.Contains(v.state, "copying volume data (1/2)") || !strings.Contains(v.state, "disk full") {
		t.Errorf("a node's error while staging is described, not final: %+v", v)
	}
	if v := judgeRestore(restore(apiv1.RestoreSucceeded, true, "")); !v.done {
		t.Errorf("succeeded: %+v", v)
	}
	if v := judgeRestore(restore(apiv1.RestoreFailed, false, "Restore target VMI must be powered off before restore operation")); v.err == nil ||
		!strings.Contains(v.err.Error(), "must be powered off") {
		t.Errorf("failed: %+v", v)
	}
	clone := func(phase, errText string) *apiv1.VirtualMachineClone {
		return &apiv1.VirtualMachineClone{Metadata: &apiv1.ObjectMeta{Name: "c"},
			Status: &apiv1.VirtualMachineCloneStatus{Phase: phase, Error: errText, RestoreName: "clone-u-restore"}}
	}
	if v := judgeClone(clone(apiv1.CloneRestoreInProgress, "")); v.done || v.err != nil || !strings.Contains(v.state, "clone-u-restore") {
		t.Errorf("in progress: %+v", v)
	}
	if v := judgeClone(clone(apiv1.CloneSucceeded, "")); !v.done {
		t.Errorf("succeeded: %+v", v)
	}
	if v := judgeClone(clone(apiv1.CloneFailed, `snapshot "s" is not ready`)); v.err == nil || !strings.Contains(v.err.Error(), `snapshot "s" is not ready`) {
		t.Errorf("failed: %+v", v)
	}
}

// A VM made by a clone keeps the MACs the clone gave the interfaces the
// configuration leaves without one, and takes the configuration's spec.
func TestMergeCloned(t *testing.T) {
	iface := func(name, mac string) *apiv1.Interface { return &apiv1.Interface{Name: name, MacAddress: mac} }
	vm := func(strategy string, ifaces ...*apiv1.Interface) *apiv1.VirtualMachine {
		return &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: &apiv1.VirtualMachineSpec{RunStrategy: strategy, Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{Interfaces: ifaces}}}}}}
	}
	cur := vm(apiv1.RunStrategyHalted, iface("default", "02:00:00:00:00:01"), iface("lan", "02:00:00:00:00:02"))
	cur.Metadata.Annotations = map[string]string{apiv1.AnnotationLastRestore: "clone-u-restore-x"}
	want := vm(apiv1.RunStrategyAlways, iface("default", ""), iface("lan", "02:aa:00:00:00:09"), iface("new", ""))
	want.Metadata.Labels = map[string]string{"app": "web"}
	got := mergeCloned(cur, want)
	ifaces := got.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces()
	if ifaces[0].GetMacAddress() != "02:00:00:00:00:01" || ifaces[1].GetMacAddress() != "02:aa:00:00:00:09" || ifaces[2].GetMacAddress() != "" {
		t.Errorf("interfaces %v", ifaces)
	}
	if got.GetSpec().GetRunStrategy() != apiv1.RunStrategyAlways || got.GetMetadata().GetLabels()["app"] != "web" ||
		got.GetMetadata().GetAnnotations()[apiv1.AnnotationLastRestore] == "" {
		t.Errorf("merged %v", got)
	}
	if m := configuredMACs(want); len(m) != 1 || m["lan"] != "02:aa:00:00:00:09" {
		t.Errorf("configuredMACs = %v", m)
	}
}

// source_snapshot replaces the VM only when it changes from one snapshot
// to another.
func TestSourceSnapshotReplace(t *testing.T) {
	schemaType := tftypes.Object{AttributeTypes: map[string]tftypes.Type{"source_snapshot": tftypes.String}}
	state := func(v tftypes.Value) tfsdk.State {
		return tfsdk.State{Raw: tftypes.NewValue(schemaType, map[string]tftypes.Value{"source_snapshot": v})}
	}
	str := func(s string) types.String { return types.StringValue(s) }
	null := types.StringNull()
	for _, c := range []struct {
		from, to types.String
		replace  bool
	}{
		{str("a"), str("b"), true},
		{null, str("a"), false},
		{str("a"), null, false},
		{str("a"), types.StringUnknown(), true},
	} {
		from, _ := c.from.ToTerraformValue(context.Background())
		req := planmodifier.StringRequest{
			Path: path.Root("source_snapshot"), StateValue: c.from, PlanValue: c.to, ConfigValue: c.to,
			State: state(from), Plan: tfsdk.Plan{Raw: tftypes.NewValue(schemaType, map[string]tftypes.Value{"source_snapshot": from})},
		}
		var resp planmodifier.StringResponse
		resp.PlanValue = c.to
		sourceSnapshotReplace().PlanModifyString(context.Background(), req, &resp)
		if resp.RequiresReplace != c.replace {
			t.Errorf("%s → %s: replace %v, want %v", c.from, c.to, resp.RequiresReplace, c.replace)
		}
	}
}
