package driver

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// libvirtRBDError is libvirt 9.0's message for a start whose rbd disk
// QEMU could not open, as measured (docs/notes/storage-probes.md), with
// cause at the end.
func libvirtRBDError(cause string) error {
	return errors.New(`internal error: qemu unexpectedly closed the monitor: 2026-12-01T10:00:00.000000Z qemu-system-x86_64: -blockdev ` +
		`{"driver":"rbd","pool":"vp","image":"q1","conf":"/var/lib/virtplane/node/ceph/virtplane-ceph.conf","server":[{"host":"169.254.91.1","port":"3300"}],` +
		`"user":"vp","auth-client-required":["cephx","none"],"key-secret":"libvirt-1-storage-auth-secret0","node-name":"libvirt-1-storage","auto-read-only":true,"discard":"unmap"}: ` + cause)
}

func TestRBDCause(t *testing.T) {
	for _, tc := range []struct{ cause, want string }{
		{"error connecting: Connection timed out", "QEMU could not open rbd image vp/q1: error connecting: Connection timed out (no monitor answered"},
		{"error connecting: Permission denied", "refused the storage class's user or key"},
		{"error opening pool nopool: No such file or directory", "the storage class's pool does not exist"},
		{"error reading header from nope: No such file or directory", "the volume's image does not exist"},
		{"error reading conf file /x/missing-ceph.conf: No such file or directory", "cannot read the storage class's ceph.conf"},
		{"something new", "QEMU could not open rbd image vp/q1: something new"},
	} {
		got, ok := rbdCause(libvirtRBDError(tc.cause).Error())
		if !ok || !strings.Contains(got, tc.want) || strings.Contains(got, "key-secret") {
			t.Errorf("%q: %q, %v; want it to say %q", tc.cause, got, ok, tc.want)
		}
	}
	for _, msg := range []string{
		"internal error: process exited while connecting to monitor",
		`qemu-system-x86_64: -blockdev {"driver":"file","filename":"/x.qcow2"}: Could not open '/x.qcow2': Permission denied`,
		`qemu-system-x86_64: -blockdev {"driver":"rbd",`,
	} {
		if got, ok := rbdCause(msg); ok {
			t.Errorf("%q read as an rbd cause: %q", msg, got)
		}
	}
}

func rbdOptions(limit time.Duration) *launcherpb.SyncOptions {
	return &launcherpb.SyncOptions{DomainName: testDomain, StartTimeoutMillis: limit.Milliseconds(),
		Disks: []*launcherpb.DiskSource{{Name: "data", Format: "raw", Rbd: &launcherpb.RBDDisk{
			Monitors: []string{"169.254.91.1:3300"}, Pool: "vp", Image: "vm-1-vol-data", User: "vp", SecretUsage: "virtplane-ceph"}}}}
}

// TestStartOfRBDFailsWithTheCause: a start QEMU fails (a monitor that
// does not answer) says which image and what it means, not QEMU's
// command line.
func TestStartOfRBDFailsWithTheCause(t *testing.T) {
	h := newHarness(t)
	h.conn.failNext("Create", libvirtRBDError("error connecting: Connection timed out"))
	_, err := h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: vmi(apiv1.PhaseScheduled), Options: rbdOptions(time.Minute)})
	wantCode(t, err, codes.FailedPrecondition, "start domain: QEMU could not open rbd image vp/q1: error connecting: Connection timed out (no monitor answered")
	if strings.Contains(err.Error(), "-blockdev") {
		t.Errorf("the error quotes QEMU's command line: %v", err)
	}
}

// TestStartBoundDestroysAHungStart: a start that does not return within
// the node agent's bound (an OSD that does not answer) is destroyed, and
// Sync fails saying the storage did not answer. Without a bound it would
// wait as long as libvirt does, which for an OSD is for ever.
func TestStartBoundDestroysAHungStart(t *testing.T) {
	h := newHarness(t)
	h.conn.hangNextCreate()
	errc := make(chan error, 1)
	go func() {
		_, err := h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: vmi(apiv1.PhaseScheduled), Options: rbdOptions(time.Minute)})
		errc <- err
	}()
	var err error
	waitFor(t, "Sync to give up on the hung start", func() bool {
		select {
		case err = <-errc:
			return true
		default:
		}
		if h.conn.callsMatching("Create") > 0 && h.clk.HasWaiters() {
			h.clk.Step(10 * time.Second)
		}
		return false
	})
	wantCode(t, err, codes.FailedPrecondition, "start domain: the storage did not answer within 1m0s: QEMU had not opened rbd image vp/vm-1-vol-data, so the domain was destroyed")
	if h.conn.callsMatching("Destroy") != 1 {
		t.Errorf("calls %v, want one Destroy", h.conn.callLog())
	}
	if s := h.conn.get(testDomain); s == nil || s.state != StateShutoff {
		t.Errorf("domain after the bound: %+v, want shut off", s)
	}
}

// TestStartWithinTheBound: a start that returns in time is left alone.
func TestStartWithinTheBound(t *testing.T) {
	h := newHarness(t)
	st, err := h.d.Sync(context.Background(), &launcherpb.SyncRequest{Vmi: vmi(apiv1.PhaseScheduled), Options: rbdOptions(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	wantState(t, st, "Running", "Booted")
	if n := h.conn.callsMatching("Destroy"); n != 0 {
		t.Errorf("%d Destroy calls", n)
	}
}
