package driver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

const foreignUUID = "4dea22b3-1d52-d8f3-2516-782e98ab3fa0"

func (h *harness) syncAdopt(v *apiv1.VirtualMachineInstance, uuid string) (*launcherpb.DomainStatus, error) {
	return h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: v, Options: &launcherpb.SyncOptions{
		DomainName: testDomain, Adopt: &launcherpb.AdoptedDomain{Uuid: uuid},
	}})
}

// putForeign adds a running domain defined outside virtplane: no
// metadata.
func (h *harness) putForeign() {
	h.conn.put(&fakeState{name: testDomain, uuid: foreignUUID, state: StateRunning, reason: 1,
		xml: "<domain type='kvm'><name>" + testDomain + "</name></domain>"})
}

// A running domain without metadata becomes the VMI's by its metadata
// alone: nothing is defined, created, destroyed or resumed.
func TestTakeOverWritesMetadataAndLeavesTheGuestRunning(t *testing.T) {
	h := newHarness(t)
	h.putForeign()
	v := vmi(apiv1.PhaseScheduled)
	v.Status.NodeName = "node-a"
	st, err := h.syncAdopt(v, foreignUUID)
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantState(t, st, "Running", "Booted")
	if st.GetVmiUid() != testUID || st.GetUuid() != foreignUUID {
		t.Errorf("status %v", st)
	}
	md := metadataOf(t, h.conn.get(testDomain))
	if md.UID != testUID || md.Namespace != "default" || md.Name != "web" || md.Node != "node-a" || !md.Adopted || md.GracePeriodSeconds != apiv1.DefaultTerminationGracePeriodSeconds {
		t.Errorf("metadata %+v", md)
	}
	for _, call := range []string{"Define", "Create", "Destroy", "Resume", "Undefine"} {
		if n := h.conn.callsMatching(call); n > 0 {
			t.Errorf("the take-over called %s %d times", call, n)
		}
	}
	// Again, as a restarted launcher's first Sync does: the domain is
	// the VMI's now, nothing changes.
	h2 := h.newDriver()
	if _, err := h2.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: v, Options: &launcherpb.SyncOptions{
		DomainName: testDomain, Adopt: &launcherpb.AdoptedDomain{Uuid: foreignUUID},
	}}); err != nil {
		t.Fatalf("second Sync: %v", err)
	}
	// And it stops and goes as any domain does.
	if _, err := h.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.d.Delete(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	if h.conn.get(testDomain) != nil {
		t.Error("the adopted domain is still defined after Delete")
	}
}

// The take-over refuses a domain that is not the one the node mapped,
// and never defines one in place of a domain that is gone.
func TestTakeOverRefusals(t *testing.T) {
	h := newHarness(t)
	h.putForeign()
	_, err := h.syncAdopt(vmi(apiv1.PhaseScheduled), "6f1c2a3e-0000-4000-8000-000000000009")
	wantCode(t, err, codes.FailedPrecondition, "another domain took its name")
	if s := h.conn.get(testDomain); s.metadata != "" {
		t.Errorf("metadata written on a refused take-over: %s", s.metadata)
	}

	h2 := newHarness(t)
	_, err = h2.syncAdopt(vmi(apiv1.PhaseScheduled), foreignUUID)
	wantCode(t, err, codes.FailedPrecondition, "to take over is gone")
	if n := h2.conn.callsMatching("Define"); n > 0 {
		t.Errorf("a domain was defined in place of the one to take over")
	}

	// Without the take-over option a foreign domain stays foreign.
	h3 := newHarness(t)
	h3.putForeign()
	_, err = h3.sync(vmi(apiv1.PhaseScheduled))
	wantCode(t, err, codes.FailedPrecondition, "not managed by virtplane")
}

// The console copy appends what arrives and rotates as virtlogd does.
func TestRotatingFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "console.log")
	w := &rotatingFile{path: p}
	chunk := []byte(strings.Repeat("x", 1<<20))
	for range 5 {
		if _, err := w.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sizes := map[string]int64{}
	for _, name := range []string{"console.log", "console.log.0", "console.log.1", "console.log.2"} {
		if fi, err := os.Stat(filepath.Join(filepath.Dir(p), name)); err == nil {
			sizes[name] = fi.Size()
		}
	}
	if sizes["console.log"] != 1<<20 || sizes["console.log.0"] != 2<<20 || sizes["console.log.1"] != 2<<20 {
		t.Errorf("sizes after 5 MiB: %v", sizes)
	}
}
