package nodeagent

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Handler decisions and the status they write, on fakes (fakeapi_test.go).

// A Scheduled VMI's domain that is defined but was never started is still
// starting within the slow-start window (it is started); after it, the
// VMI failed to start and the domain goes.
func TestSlowStartWindow(t *testing.T) {
	for _, tc := range []struct {
		name    string
		elapsed time.Duration
		phase   string
		reason  string
	}{
		{"within the window", DefaultSlowStartWindow - time.Second, apiv1.PhaseRunning, ""},
		{"after the window", DefaultSlowStartWindow + time.Second, apiv1.PhaseFailed, ReasonDomainStopped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t)
			v := u.create("s")
			// Left by an earlier pass that recorded and defined it.
			rec, err := u.a.handler.NewRecord(v)
			if err != nil {
				t.Fatal(err)
			}
			if err := u.db.PutVMI(rec); err != nil {
				t.Fatal(err)
			}
			u.fake.AddDomain(fake.Domain{Name: domainOf("s"), VMIUID: v.Metadata.Uid, VMIKey: "default/s",
				State: fake.StateShutoff, Reason: fake.ReasonUnknown})
			u.clock.Step(tc.elapsed)
			u.mustReconcile("s")
			got := u.vmis.get("s").Status
			if got.Phase != tc.phase || got.Reason != tc.reason {
				t.Fatalf("phase %s/%s, want %s/%s", got.Phase, got.Reason, tc.phase, tc.reason)
			}
			d, exists := u.fake.Domain(domainOf("s"))
			if started := exists && d.Starts == 1; started != (tc.phase == apiv1.PhaseRunning) {
				t.Errorf("domain %+v (exists %v)", d, exists)
			}
		})
	}
}

// Starting a VMI: record, launch, save the handle, sync, and only then
// report Running (Nomad: persist the handle before reporting running),
// with the domain's facts, once: a pass that finds nothing changed writes
// and syncs nothing.
func TestStartPersistsHandleBeforeRunning(t *testing.T) {
	u := newUnit(t)
	writeFile(t, filepath.Join(u.imageDir, "base.img"))
	v := u.create("web", withImageDisk("root", "base.img"))
	u.mustReconcile("web")

	ev := u.tl.events()
	launch, put, sync, running := u.tl.index("launcher:Launch"), u.tl.index("put:handle=true"), u.tl.index("launcher:Sync"), u.tl.index("status:Running")
	if launch < 0 || put < 0 || sync < 0 || running < 0 {
		t.Fatalf("missing steps in %v", ev)
	}
	if !(u.tl.index("put:handle=false") < launch && launch < put && put < sync && sync < running) {
		t.Fatalf("want record, Launch, handle saved, Sync, Running in that order; got %v", ev)
	}

	st := u.vmis.get("web").GetStatus()
	if st.Phase != apiv1.PhaseRunning {
		t.Fatalf("phase %s", st.Phase)
	}
	d, ok := u.fake.Domain(domainOf("web"))
	if !ok || d.State != fake.StateRunning || d.VMIUID != v.Metadata.Uid || d.Starts != 1 {
		t.Fatalf("domain %+v", d)
	}
	if st.DomainUuid != d.UUID {
		t.Errorf("domain_uuid %q, want %q", st.DomainUuid, d.UUID)
	}
	if c := apiv1.FindCondition(st.Conditions, apiv1.ConditionReady); c.GetStatus() != apiv1.ConditionTrue {
		t.Errorf("Ready condition %v", c)
	}
	if c := apiv1.FindCondition(st.Conditions, apiv1.ConditionSoftwareEmulation); c.GetStatus() != apiv1.ConditionTrue {
		t.Errorf("SoftwareEmulation condition %v (no KVM on this host)", c)
	}
	last := st.PhaseTransitionTimestamps[len(st.PhaseTransitionTimestamps)-1]
	if last.Phase != apiv1.PhaseRunning || last.Time == nil {
		t.Errorf("no Running transition timestamp: %v", st.PhaseTransitionTimestamps)
	}
	rec, err := u.db.GetVMIByKey("default/web")
	if err != nil || rec.Handle.Pid == 0 || rec.DomainName != "default_web" || rec.GracePeriodSeconds != 30 ||
		rec.NodeFailurePolicy != apiv1.NodeFailurePolicyWait {
		t.Fatalf("record %+v, %v", rec, err)
	}
	if _, err := os.Stat(filepath.Join(nodedir.DisksDir(rec.Dir), "root.qcow2")); err != nil {
		t.Errorf("overlay: %v", err)
	}

	// A second pass writes nothing and syncs nothing.
	u.mustReconcile("web")
	if len(u.vmis.writes) != 1 {
		t.Errorf("an unchanged VMI was written again: %d status writes, want 1: %v", len(u.vmis.writes), u.vmis.writes)
	}
	if n := u.fake.Count("Sync"); n != 1 {
		t.Errorf("Sync called %d times", n)
	}
}

// libvirt refusing to converge a running guest leaves it running and
// shows the condition; the pass fails so that it is retried.
func TestSyncErrorOfARunningVMIKeepsItRunning(t *testing.T) {
	u := newUnit(t)
	u.create("k")
	u.mustReconcile("k")
	// A new launcher syncs again: the old one died.
	u.fake.CrashLaunchers(domainOf("k"))
	u.fake.SetSyncError(domainOf("k"), "internal error: cannot update the domain")
	// The pass that finds the launcher dead (through its ended event
	// stream, or a refused call) replaces it; that is this one or the next.
	_, err := u.reconcile("k")
	if err == nil {
		_, err = u.reconcile("k")
	}
	if err == nil {
		t.Fatal("no error to retry with")
	}
	st := u.vmis.get("k").Status
	c := apiv1.FindCondition(st.Conditions, apiv1.ConditionSynchronized)
	if st.Phase != apiv1.PhaseRunning || c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonSyncFailed ||
		c.GetMessage() != "internal error: cannot update the domain" {
		t.Fatalf("phase %s, Synchronized %v", st.Phase, c)
	}
	if d, _ := u.fake.Domain(domainOf("k")); d.State != fake.StateRunning {
		t.Errorf("guest touched: %+v", d)
	}
}

// A disk that cannot be prepared fails the VMI, unless the disk room
// says to retry (a volume not provisioned yet): then it waits, showing
// why, and the pass fails so that it is retried with backoff.
func TestPrepareErrorFailsOrWaits(t *testing.T) {
	for _, retry := range []bool{false, true} {
		u := newUnit(t)
		u.a.handler.disks = fakeDisks{err: &disks.Error{Reason: apiv1.ReasonDataVolumeError, Retry: retry, Err: errors.New("no space")}}
		u.create("p")
		_, err := u.reconcile("p")
		st := u.vmis.get("p").Status
		c := apiv1.FindCondition(st.Conditions, apiv1.ConditionSynchronized)
		if c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != apiv1.ReasonDataVolumeError || c.GetMessage() != "no space" {
			t.Errorf("retry %v: Synchronized %v", retry, c)
		}
		wantPhase := apiv1.PhaseFailed
		if retry {
			wantPhase = apiv1.PhaseScheduled
		}
		if st.Phase != wantPhase || (err != nil) != retry {
			t.Errorf("retry %v: phase %s, err %v; want %s and an error only to retry", retry, st.Phase, err, wantPhase)
		}
		if u.fake.Count("Launch") != 0 {
			t.Errorf("retry %v: a launcher started without its disks", retry)
		}
	}
}

// A force stop shortens the grace period while the VMI exists; the
// record keeps it for when the VMI is gone.
func TestGracePeriodFollowsTheVMI(t *testing.T) {
	u := newUnit(t)
	v := u.create("g", withGrace(60))
	u.mustReconcile("g")
	v.Spec.TerminationGracePeriodSeconds = new(int64)
	u.vmis.put(v)
	u.mustReconcile("g")
	rec, err := u.db.GetVMI(v.Metadata.Uid)
	if err != nil || rec.GracePeriodSeconds != 0 {
		t.Fatalf("record %+v, %v: want grace 0", rec, err)
	}
}

// noScanDB is a state database whose records must not be listed.
type noScanDB struct {
	state.StateDB
	t *testing.T
}

func (d noScanDB) ListVMIs() ([]*state.VMI, error) {
	d.t.Error("every record read to find one")
	return d.StateDB.ListVMIs()
}

// The record is found by key among others, without reading them all, and
// a VMI without one is handled as new.
func TestRecordForFindsByKey(t *testing.T) {
	u := newUnit(t)
	u.a.handler.db = noScanDB{u.db, t}
	for _, r := range []*state.VMI{
		{UID: "u1", Namespace: "default", Name: "a"},
		{UID: "u2", Namespace: "other", Name: "a"},
		{UID: "u3", Namespace: "default", Name: "b"},
	} {
		if err := u.db.PutVMI(r); err != nil {
			t.Fatal(err)
		}
	}
	for key, uid := range map[string]string{"default/a": "u1", "other/a": "u2", "default/b": "u3", "default/c": ""} {
		rec, err := u.a.handler.Record(key)
		if err != nil {
			t.Fatal(err)
		}
		if (rec == nil) != (uid == "") || (rec != nil && rec.UID != uid) {
			t.Errorf("recordFor(%s) = %+v, want uid %q", key, rec, uid)
		}
	}
}
