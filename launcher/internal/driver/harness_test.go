package driver

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

const (
	testDomain = "default_web"
	testUID    = "uid-1"
)

// harness is one launcher's driver over a fake libvirt (fake_test.go),
// called as the node agent calls it through gRPC.
type harness struct {
	t    *testing.T
	conn *fakeConn
	d    *Driver
	now  time.Time
	pids string
	// clk paces the address lookups; vlans records SetVLAN's calls.
	clk   *clocktesting.FakeClock
	vlans *vlanRecorder
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, conn: newFakeConn(), now: time.Unix(1_700_000_000, 0), pids: t.TempDir(),
		clk: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), vlans: &vlanRecorder{}}
	h.d = h.newDriver()
	return h
}

// newDriver is a fresh launcher over the same libvirt, as after a launcher
// crash.
func (h *harness) newDriver() *Driver {
	h.t.Helper()
	d, err := New(h.conn, h.conn.events, Config{
		DomainName: testDomain,
		VMIUID:     testUID,
		QEMUPidDir: h.pids,
		Version:    "test",
		Now:        func() time.Time { return h.now },
		Clock:      h.clk,
		SetVLAN:    h.vlans.set,
		Neighbours: h.neighbours,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(d.Close)
	return d
}

func vmi(phase string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: testUID},
		Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{
			Memory: &apiv1.Memory{Guest: "128Mi"},
		}},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase},
	}
}

func (h *harness) sync(v *apiv1.VirtualMachineInstance) (*launcherpb.DomainStatus, error) {
	return h.syncPolicy(v, "")
}

// syncPolicy syncs as the node agent does, which passes the VMI's node
// failure policy.
func (h *harness) syncPolicy(v *apiv1.VirtualMachineInstance, policy string) (*launcherpb.DomainStatus, error) {
	return h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: v,
		Options: &launcherpb.SyncOptions{DomainName: testDomain, NodeFailurePolicy: policy}})
}

func (h *harness) renew(d time.Duration) error {
	_, err := h.d.RenewLease(context.Background(), &launcherpb.LeaseRequest{ValidForMillis: d.Milliseconds()})
	return err
}

func (h *harness) mustSync(v *apiv1.VirtualMachineInstance) *launcherpb.DomainStatus {
	h.t.Helper()
	st, err := h.sync(v)
	if err != nil {
		h.t.Fatalf("Sync: %v", err)
	}
	return st
}

func wantState(t *testing.T, st *launcherpb.DomainStatus, state, reason string) {
	t.Helper()
	if st.GetState() != state || st.GetReason() != reason {
		t.Fatalf("status = %s/%s, want %s/%s (%v)", st.GetState(), st.GetReason(), state, reason, st)
	}
}

func wantCode(t *testing.T, err error, code codes.Code, msg string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(err.Error(), msg) {
		t.Fatalf("error = %v, want %s containing %q", err, code, msg)
	}
}

func metadataOf(t *testing.T, s *fakeState) domxml.Metadata {
	t.Helper()
	md, err := domxml.ParseMetadata(s.metadata)
	if err != nil {
		t.Fatal(err)
	}
	return md
}
