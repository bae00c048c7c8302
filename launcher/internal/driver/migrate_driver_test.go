package driver

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

const sourceUUID = "6f1c2a3e-0000-4000-8000-0000000000aa"

func (h *harness) incoming(mig string, validFor time.Duration) (*launcherpb.MigrationStatus, error) {
	v := vmi(apiv1.PhaseRunning)
	v.Status.DomainUuid = sourceUUID
	v.Status.NodeName = "target"
	return h.d.Incoming(context.Background(), &launcherpb.IncomingRequest{MigrationUid: mig, ValidForMillis: validFor.Milliseconds(),
		Sync: &launcherpb.SyncRequest{Vmi: v, Options: &launcherpb.SyncOptions{DomainName: testDomain}}})
}

// The destination the server builds for a target registered at
// 10.0.0.2 on a tcp cluster.
const targetURI, targetAddr = "qemu+tcp://10.0.0.2:16509/system", "10.0.0.2"

func (h *harness) migrate(mig string) (*launcherpb.MigrationStatus, error) {
	return h.d.Migrate(context.Background(), &launcherpb.MigrateRequest{MigrationUid: mig, TargetLibvirtUri: targetURI,
		TargetAddress: targetAddr, DestXml: "<domain/>",
		Configuration: &apiv1.MigrationConfiguration{CompletionTimeoutPerGibSeconds: 150, ProgressTimeoutSeconds: 150}})
}

func (h *harness) migration() *launcherpb.MigrationStatus {
	h.t.Helper()
	st, err := h.d.GetMigration(context.Background(), &launcherpb.Empty{})
	if err != nil {
		h.t.Fatal(err)
	}
	return st
}

func TestIncomingDefinesTheReceivingDomain(t *testing.T) {
	h := newHarness(t)
	st, err := h.incoming("m1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.GetRole() != RoleTarget || !st.GetRunning() || !strings.Contains(st.GetDomainXml(), sourceUUID) {
		t.Fatalf("Incoming = %v; want a waiting target with the source's UUID in its XML", st)
	}
	s := h.conn.get(testDomain)
	if s == nil || s.state != StateShutoff || h.conn.callsMatching("Create") != 0 {
		t.Fatalf("the receiving domain must be defined, not started: %+v", s)
	}
	if rec := metadataOf(t, s).Migration; rec == nil || rec.UID != "m1" || rec.Role != RoleTarget {
		t.Fatalf("metadata record = %+v", rec)
	}
	if again, err := h.incoming("m1", 0); err != nil || again.GetDomainXml() != st.GetDomainXml() {
		t.Fatalf("Incoming again = %v, %v; want the same domain", again, err)
	}
	_, err = h.incoming("m2", 0)
	wantCode(t, err, codes.FailedPrecondition, "not this migration's target")
	_, err = h.d.Incoming(context.Background(), &launcherpb.IncomingRequest{MigrationUid: "m3",
		Sync: &launcherpb.SyncRequest{Vmi: vmi(apiv1.PhaseRunning)}})
	wantCode(t, err, codes.InvalidArgument, "domain_uuid")
}

// A receiving domain whose agent stops renewing it is removed, unless the
// guest has arrived.
func TestIncomingExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		if _, err := h.incoming("m1", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second)
		if _, err := h.incoming("m1", 10*time.Second); err != nil { // renewed
			t.Fatal(err)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if h.conn.get(testDomain) == nil {
			t.Fatal("a renewed receiving domain was removed")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if s := h.conn.get(testDomain); s != nil {
			t.Fatalf("the receiving domain outlived its renewals: %+v", s)
		}

		// Arrived: kept whatever the renewals do.
		h2 := newHarness(t)
		if _, err := h2.incoming("m2", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		h2.conn.mu.Lock()
		h2.conn.doms[testDomain].state, h2.conn.doms[testDomain].reason = StateRunning, 2 // Running/Migrated
		h2.conn.mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		if s := h2.conn.get(testDomain); s == nil || s.state != StateRunning {
			t.Fatalf("an arrived guest was removed: %+v", s)
		}
	})
}

// TestMigrateRefusesDestinations: a destination that is not exactly what
// the server builds never reaches libvirt (whose daemon would open it as
// root: ext's command= runs a program), and no migration is recorded.
func TestMigrateRefusesDestinations(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	for _, tc := range []struct{ uri, addr string }{
		{"qemu+ext://10.0.0.2/system?command=/tmp/x", targetAddr},
		{"qemu+ext:///system?command=/tmp/x", targetAddr},
		{"qemu+ssh://root@10.0.0.2/system", targetAddr},
		{targetURI + "?no_verify=1", targetAddr},
		{targetURI, "192.0.2.254"},
		{targetURI, ""},
		{"", targetAddr},
	} {
		st, err := h.d.Migrate(context.Background(), &launcherpb.MigrateRequest{MigrationUid: "m1", TargetLibvirtUri: tc.uri,
			TargetAddress: tc.addr, DestXml: "<domain/>"})
		if err == nil {
			h.conn.finishJob(testDomain, errors.New("ended by the test")) // the job it started must end for the cleanup
			t.Fatalf("Migrate to %q (address %q) started libvirt's job: %v", tc.uri, tc.addr, st)
		}
		wantCode(t, err, codes.InvalidArgument, "target_libvirt_uri")
	}
	if n := h.conn.callsMatching("Migrate"); n != 0 {
		t.Fatalf("libvirt's migration was called %d times", n)
	}
	if st := h.migration(); st.GetMigrationUid() != "" {
		t.Fatalf("a refused migration was recorded: %v", st)
	}
}

// An EFI guest's destination XML goes to libvirt with the firmware the
// source runs (libvirt 9.0 resolves none for an incoming domain), its
// persistent definition as the target made it; one that cannot be
// completed never reaches libvirt.
func TestMigrateCompletesTheEFIDestination(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "domxml", "testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	efiTarget, efiSource := read("migrate_efi_target.xml"), read("migrate_efi_source.xml")
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled)) // a BIOS guest
	req := &launcherpb.MigrateRequest{MigrationUid: "m1", TargetLibvirtUri: targetURI, TargetAddress: targetAddr, DestXml: efiTarget}
	st, err := h.d.Migrate(context.Background(), req)
	if err == nil {
		h.conn.finishJob(testDomain, errors.New("ended by the test")) // the job it started must end for the cleanup
		t.Fatalf("an EFI destination without firmware started libvirt's job: %v", st)
	}
	wantCode(t, err, codes.InvalidArgument, "dest_xml: the destination XML asks for EFI firmware (firmware='efi') but the source's running domain names no loader")
	if n := h.conn.callsMatching("Migrate"); n != 0 {
		t.Fatalf("libvirt's migration was called %d times", n)
	}
	if st := h.migration(); st.GetMigrationUid() != "" {
		t.Fatalf("a refused migration was recorded: %v", st)
	}

	// The source runs OVMF: libvirt resolved its loader when it started.
	h.conn.mu.Lock()
	h.conn.doms[testDomain].xml = efiSource
	h.conn.mu.Unlock()
	if _, err := h.d.Migrate(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	j := h.conn.job(testDomain)
	var p MigrateParams
	testutil.Eventually(t, 5*time.Second, "libvirt's job started", func() bool {
		h.conn.mu.Lock()
		defer h.conn.mu.Unlock()
		p = j.params
		return p.DestXML != ""
	})
	h.conn.finishJob(testDomain, nil)
	if p.PersistXML != efiTarget {
		t.Errorf("persistent XML is not the target's own:\n%s", p.PersistXML)
	}
	if !strings.Contains(p.DestXML, `<loader readonly="yes" type="pflash">/usr/share/OVMF/OVMF_CODE_4M.fd</loader>`) ||
		!strings.Contains(p.DestXML, `<nvram template="/usr/share/OVMF/OVMF_VARS_4M.fd">/var/lib/virtplane/node-b/`) ||
		strings.Contains(p.DestXML, `firmware="efi"`) {
		t.Errorf("destination XML not completed with the source's firmware and the target's NVRAM:\n%s", p.DestXML)
	}
}

func TestMigrateOutcomes(t *testing.T) {
	h := newHarness(t)
	_, err := h.migrate("m0")
	wantCode(t, err, codes.FailedPrecondition, "does not exist")
	h.mustSync(vmi(apiv1.PhaseScheduled))
	_, err = h.d.Migrate(context.Background(), &launcherpb.MigrateRequest{MigrationUid: "m0", TargetLibvirtUri: targetURI, TargetAddress: targetAddr})
	wantCode(t, err, codes.InvalidArgument, "dest_xml")

	// Aborted on request: failed, abort Succeeded, the guest stays.
	st, err := h.migrate("m1")
	if err != nil || !st.GetRunning() || st.GetRole() != RoleSource {
		t.Fatalf("Migrate = %v, %v", st, err)
	}
	_, err = h.migrate("m2")
	wantCode(t, err, codes.FailedPrecondition, "still running")
	if _, err := h.d.AbortMigration(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	var got *launcherpb.MigrationStatus
	for got = h.migration(); got.GetRunning(); got = h.migration() {
		time.Sleep(time.Millisecond)
	}
	if !got.GetFailed() || got.GetAbortStatus() != apiv1.MigrationAbortSucceeded || !strings.Contains(got.GetFailureReason(), "aborted") {
		t.Fatalf("aborted migration = %v", got)
	}
	if s := h.conn.get(testDomain); s.state != StateRunning {
		t.Fatalf("the guest did not stay: %s", s.state)
	}
	// The same uid is never run again.
	if again, err := h.migrate("m1"); err != nil || again.GetRunning() || !again.GetFailed() {
		t.Fatalf("Migrate m1 again = %v, %v; want its record", again, err)
	}

	// Completed: the domain migrated away; a restarted launcher still knows.
	if _, err := h.migrate("m3"); err != nil {
		t.Fatal(err)
	}
	h.conn.setJobStats(testDomain, JobStats{DowntimeMs: 40, ElapsedMs: 700, DataTotal: 100})
	h.conn.finishJob(testDomain, nil)
	for got = h.migration(); got.GetRunning(); got = h.migration() {
		time.Sleep(time.Millisecond)
	}
	if !got.GetCompleted() || got.GetFailed() || got.GetProgress().GetDowntimeMs() != 40 {
		t.Fatalf("completed migration = %v", got)
	}
	h.d = h.newDriver()
	if rec := h.migration(); rec.GetMigrationUid() != "m3" || !rec.GetCompleted() || rec.GetFailed() {
		t.Fatalf("after a launcher restart: %v", rec)
	}
}

// A launcher that restarted while its job ran decides from libvirt: a
// job still running is running, a domain stopped as migrated succeeded,
// one still running without a job failed.
func TestRecordedMigrationDecidedFromLibvirt(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	if _, err := h.migrate("m1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.conn.finishJob(testDomain, errAborted) })
	waitUntil(t, func() bool { return h.conn.jobActive(testDomain) })
	// A new launcher while the job runs: running.
	h.d = h.newDriver()
	if st := h.migration(); !st.GetRunning() || st.GetMigrationUid() != "m1" {
		t.Fatalf("a running job reported as %v", st)
	}

	// The record as a launcher that died mid-job left it (start, no end),
	// against each state libvirt can show.
	rec := &domxml.MigrationRecord{UID: "m9", Role: RoleSource, Start: 1}
	for _, tc := range []struct {
		name           string
		state          State
		reason         int
		failed         bool
		reasonContains string
	}{
		{"migrated away", StateShutoff, 4, false, ""},
		{"still here without a job", StateRunning, 1, true, "is gone and the domain is Running"},
	} {
		dom := &fakeDomain{c: h.conn, name: "decided-" + tc.name}
		h.conn.put(&fakeState{name: dom.name, state: tc.state, reason: tc.reason})
		st, err := h.d.recordedMigration(dom, rec)
		if err != nil {
			t.Fatal(err)
		}
		if st.GetRunning() || !st.GetCompleted() || st.GetFailed() != tc.failed || !strings.Contains(st.GetFailureReason(), tc.reasonContains) {
			t.Errorf("%s: %v", tc.name, st)
		}
	}
}

// waitUntil waits (outside a synctest bubble) until cond holds.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}

// The monitor aborts a job that makes no progress for the progress
// timeout, and records why.
func TestMonitorAbortsWithoutProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newRunningOnBubbleClock(t)
		h.conn.setJobStats(testDomain, JobStats{DataTotal: 1 << 30, DataRemaining: 512 << 20})
		if _, err := h.d.Migrate(context.Background(), &launcherpb.MigrateRequest{MigrationUid: "m1", TargetLibvirtUri: targetURI,
			TargetAddress: targetAddr, DestXml: "<domain/>", Configuration: &apiv1.MigrationConfiguration{CompletionTimeoutPerGibSeconds: 600, ProgressTimeoutSeconds: 150}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(149 * time.Second)
		synctest.Wait()
		if st := h.migration(); !st.GetRunning() || h.conn.callsMatching("AbortJob") != 0 {
			t.Fatalf("aborted before the progress timeout: %v", st)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		st := h.migration()
		if !st.GetFailed() || !strings.Contains(st.GetFailureReason(), "no progress") || st.GetAbortStatus() != "" {
			t.Fatalf("after the progress timeout: %v", st)
		}
	})
}

// The monitor aborts a job that runs past its completion timeout (per GiB
// of the data to move), even while it progresses.
func TestMonitorAbortsPastCompletionTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newRunningOnBubbleClock(t)
		if _, err := h.d.Migrate(context.Background(), &launcherpb.MigrateRequest{MigrationUid: "m1", TargetLibvirtUri: targetURI,
			TargetAddress: targetAddr, DestXml: "<domain/>", DataBytes: 3 << 30, // 3 GiB: 3 × 10 s
			Configuration: &apiv1.MigrationConfiguration{CompletionTimeoutPerGibSeconds: 10, ProgressTimeoutSeconds: 600}}); err != nil {
			t.Fatal(err)
		}
		for i := range 29 { // progressing every second
			h.conn.setJobStats(testDomain, JobStats{DataTotal: 3 << 30, DataRemaining: uint64(3<<30 - (i+1)<<20)})
			time.Sleep(time.Second)
		}
		synctest.Wait()
		if st := h.migration(); !st.GetRunning() {
			t.Fatalf("aborted before 30 s: %v", st)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := h.migration(); !st.GetFailed() || !strings.Contains(st.GetFailureReason(), "did not complete within 30s") {
			t.Fatalf("after the completion timeout: %v", st)
		}
	})
}

// newRunningOnBubbleClock is a harness with a running domain whose driver
// measures time on the synctest bubble's clock (the monitor's timeouts).
func newRunningOnBubbleClock(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	d, err := New(h.conn, h.conn.events, Config{DomainName: testDomain, VMIUID: testUID, QEMUPidDir: h.pids, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	h.d.Close()
	h.d = d
	t.Cleanup(d.Close)
	return h
}
