package driver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

const mib = 1 << 20

// syncDisks syncs with two virtio disks: root (vda, no size) and data
// (vdb, a persistent volume of size bytes).
func (h *harness) syncDisks(v *apiv1.VirtualMachineInstance, size int64) (*launcherpb.DomainStatus, error) {
	return h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: v, Options: &launcherpb.SyncOptions{
		DomainName: testDomain,
		Disks: []*launcherpb.DiskSource{
			{Name: "root", Path: "/var/lib/virtplane/vmis/x/disks/root.qcow2", Format: "qcow2", Device: "disk", Bus: "virtio"},
			{Name: "data", Path: "/var/lib/virtplane/vms/y/volumes/data.qcow2", Format: "qcow2", Device: "disk", Bus: "virtio", SizeBytes: size},
		},
	}})
}

func (h *harness) resizes() []string {
	var out []string
	for _, c := range h.conn.callLog() {
		if strings.HasPrefix(c, "BlockResize") {
			out = append(out, c)
		}
	}
	return out
}

// A running domain's disk below its size grows, once: the next Sync
// finds it large enough. A disk without a size is not looked at.
func TestSyncGrowsRunningDisk(t *testing.T) {
	h := newHarness(t)
	h.conn.setCapacity("vda", 10*mib)
	h.conn.setCapacity("vdb", 64*mib)
	if _, err := h.syncDisks(vmi(apiv1.PhaseScheduled), 64*mib); err != nil {
		t.Fatal(err)
	}
	if got := h.resizes(); len(got) != 0 {
		t.Fatalf("resized a disk of its size: %v", got)
	}
	st, err := h.syncDisks(vmi(apiv1.PhaseRunning), 128*mib)
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, "Running", "Booted")
	if got, want := h.resizes(), []string{"BlockResize vdb 134217728"}; !slices.Equal(got, want) {
		t.Fatalf("resizes %v, want %v", got, want)
	}
	if _, err := h.syncDisks(vmi(apiv1.PhaseRunning), 128*mib); err != nil {
		t.Fatal(err)
	}
	if got := h.resizes(); len(got) != 1 || h.conn.capacityOf("vdb") != 128*mib || h.conn.callsMatching("BlockCapacity vda") != 0 {
		t.Fatalf("second sync: resizes %v, capacity %d, vda looked at %d times", got, h.conn.capacityOf("vdb"), h.conn.callsMatching("BlockCapacity vda"))
	}
}

// A disk larger than its size is never shrunk; a domain that does not run
// is not resized (its volume is grown before it starts).
func TestSyncNeverShrinksNorResizesStoppedDomain(t *testing.T) {
	h := newHarness(t)
	h.conn.setCapacity("vdb", 256*mib)
	if _, err := h.syncDisks(vmi(apiv1.PhaseScheduled), 128*mib); err != nil {
		t.Fatal(err)
	}
	if got := h.resizes(); len(got) != 0 {
		t.Fatalf("resizes %v, want none", got)
	}
	// The guest powered off: the domain is down, the VMI still Running.
	d, _ := h.conn.LookupDomainByName(testDomain)
	if err := d.Destroy(false); err != nil {
		t.Fatal(err)
	}
	if _, err := h.syncDisks(vmi(apiv1.PhaseRunning), 512*mib); err != nil {
		t.Fatal(err)
	}
	if got := h.resizes(); len(got) != 0 || h.conn.callsMatching("BlockCapacity") != 1 {
		t.Fatalf("stopped domain: resizes %v, capacity read %d times", got, h.conn.callsMatching("BlockCapacity"))
	}
}

// A resize libvirt refuses fails the Sync with the disk named; the guest
// keeps running and the next Sync tries again.
func TestSyncGrowFailureNamesDisk(t *testing.T) {
	h := newHarness(t)
	h.conn.setCapacity("vdb", 64*mib)
	if _, err := h.syncDisks(vmi(apiv1.PhaseScheduled), 64*mib); err != nil {
		t.Fatal(err)
	}
	h.conn.failNext("BlockResize vdb 134217728", errors.New("block job in progress"))
	_, err := h.syncDisks(vmi(apiv1.PhaseRunning), 128*mib)
	wantCode(t, err, codes.Unknown, `disk "data" (vdb): growing it from 67108864 to 134217728 bytes: block job in progress`)
	if st := h.conn.get(testDomain); st.state != StateRunning {
		t.Fatalf("domain %s after a failed resize", st.state)
	}
	if _, err := h.syncDisks(vmi(apiv1.PhaseRunning), 128*mib); err != nil || h.conn.capacityOf("vdb") != 128*mib {
		t.Fatalf("retry: %v, capacity %d", err, h.conn.capacityOf("vdb"))
	}
}
