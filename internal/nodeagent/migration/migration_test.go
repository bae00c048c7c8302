package migration

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// serverURI is the destination the server builds for b, registered at
// 10.0.0.2.
const serverURI = "qemu+tls://10.0.0.2:16514/system"

func handedOff() *apiv1.VirtualMachineInstanceStatus {
	return &apiv1.VirtualMachineInstanceStatus{
		Phase: apiv1.PhaseRunning, NodeName: "a",
		MigrationState: &apiv1.MigrationState{MigrationUid: "m", SourceNode: "a", TargetNode: "b", TargetDomainXml: "<domain/>",
			TargetLibvirtUri: serverURI, TargetNodeAddress: "10.0.0.2"},
	}
}

// TestSourceRefusesDestinations: the source starts nothing towards a
// destination other than what the server builds, and says why.
func TestSourceRefusesDestinations(t *testing.T) {
	if r := refusedDestination(handedOff().GetMigrationState()); r != "" {
		t.Fatalf("the server's destination refused: %s", r)
	}
	for _, tc := range []struct{ uri, addr, want string }{
		{"qemu+ext://192.0.2.254/system?command=/tmp/x", "192.0.2.254", `the destination "qemu+ext://192.0.2.254/system?command=/tmp/x" (address "192.0.2.254") is refused: scheme "qemu+ext"`},
		{serverURI, "192.0.2.254", "must be the target's migration address 192.0.2.254"},
		{"", "", "is refused"},
	} {
		st := handedOff().GetMigrationState()
		st.TargetLibvirtUri, st.TargetNodeAddress = tc.uri, tc.addr
		if r := refusedDestination(st); !strings.Contains(r, tc.want) || !strings.HasPrefix(r, "the migration could not start: ") {
			t.Errorf("%q, %q: %q; want it refused saying %q", tc.uri, tc.addr, r, tc.want)
		}
	}
}

func TestSourceProgress(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	start := now.Add(-2 * time.Second)

	st := handedOff()
	sourceProgress(&launcherpb.MigrationStatus{MigrationUid: "m", Running: true, Mode: apiv1.MigrationModePreCopy,
		StartUnixMillis: start.UnixMilli(), Progress: &apiv1.MigrationProgress{DataRemainingBytes: 5}})(st, now)
	m := st.GetMigrationState()
	if !m.GetStartTimestamp().AsTime().Equal(start) || m.GetCompleted() || st.GetNodeName() != "a" || m.GetProgress().GetDataRemainingBytes() != 5 {
		t.Fatalf("running: %v", st)
	}

	failed := handedOff()
	sourceProgress(&launcherpb.MigrationStatus{Completed: true, Failed: true, FailureReason: "aborted",
		AbortStatus: apiv1.MigrationAbortSucceeded, EndUnixMillis: now.UnixMilli()})(failed, now)
	if m := failed.GetMigrationState(); !m.GetCompleted() || !m.GetFailed() || m.GetFailureReason() != "aborted" ||
		m.GetAbortStatus() != apiv1.MigrationAbortSucceeded || failed.GetNodeName() != "a" || m.GetTargetDomainXml() != "" {
		t.Fatalf("a failed migration moved the instance or kept its XML: %v", failed)
	}

	done := handedOff()
	sourceProgress(&launcherpb.MigrationStatus{Completed: true, EndUnixMillis: now.UnixMilli(),
		Progress: &apiv1.MigrationProgress{DowntimeMs: 40}})(done, now)
	if m := done.GetMigrationState(); !m.GetCompleted() || m.GetFailed() || done.GetNodeName() != "b" ||
		!m.GetEndTimestamp().AsTime().Equal(now) || m.GetProgress().GetDowntimeMs() != 40 {
		t.Fatalf("a completed migration must hand the instance to the target in the same write: %v", done)
	}
}

func TestTargetReadyPublishesOnce(t *testing.T) {
	tg := New(Options{Address: "10.0.0.2"}).target
	st := handedOff()
	st.MigrationState.TargetDomainXml = ""
	first := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	tg.ready(&launcherpb.MigrationStatus{DomainXml: "<domain>x</domain>"})(st, first)
	tg.ready(&launcherpb.MigrationStatus{DomainXml: "<domain>y</domain>"})(st, first.Add(time.Minute))
	m := st.GetMigrationState()
	if m.GetTargetDomainXml() != "<domain>x</domain>" || !m.GetTargetReadyTimestamp().AsTime().Equal(first) {
		t.Fatalf("target fields = %v", m)
	}
	// Where it receives is the server's (the handoff's destination): the
	// target leaves it as it is.
	if m.GetTargetLibvirtUri() != serverURI || m.GetTargetNodeAddress() != "10.0.0.2" {
		t.Fatalf("the target changed the destination: %v", m)
	}
	// Nothing once the source started.
	started := handedOff()
	started.MigrationState.TargetDomainXml = ""
	started.MigrationState.StartTimestamp = timestamppb.New(first)
	tg.ready(&launcherpb.MigrationStatus{DomainXml: "<domain/>"})(started, first)
	if started.GetMigrationState().GetTargetReadyTimestamp() != nil {
		t.Fatal("the target rewrote its fields after the source started")
	}
}

func TestSourceActs(t *testing.T) {
	now := timestamppb.Now()
	for _, tc := range []struct {
		name string
		st   *apiv1.MigrationState
		want bool
	}{
		{"handed off", &apiv1.MigrationState{}, false},
		{"ready without XML", &apiv1.MigrationState{TargetReadyTimestamp: now}, false},
		{"ready", &apiv1.MigrationState{TargetReadyTimestamp: now, TargetDomainXml: "<domain/>"}, true},
		{"started", &apiv1.MigrationState{StartTimestamp: now}, true},
		{"canceled", &apiv1.MigrationState{AbortRequested: true}, true},
	} {
		if got := sourceActs(tc.st); got != tc.want {
			t.Errorf("%s: sourceActs = %v, want %v", tc.name, got, tc.want)
		}
	}
}
