package nodeagent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// A domain libvirt holds paused on the way to something else (a guest
// panic before on_crash, start, shutdown) is not a paused VMI; a user or
// I/O error pause is.
func TestPausedCondition(t *testing.T) {
	for _, c := range []struct {
		reason     string
		byUser     bool
		wantReason string // "" means no Paused condition
	}{
		{"User", true, ReasonPausedByUser},
		{"Unknown", true, ReasonPausedByUser},
		{"IOError", false, ReasonPausedIOError},
		{"Watchdog", false, "Paused"},
		{"Unknown", false, ""}, // a guest panic, before libvirt sees it as one
		{"Crashed", false, ""},
		{"StartingUp", false, ""},
		{"ShuttingDown", false, ""},
	} {
		st := &apiv1.VirtualMachineInstanceStatus{}
		setPausedCondition(st, &launcherpb.DomainStatus{Exists: true, State: statePaused, Reason: c.reason, PausedByUser: c.byUser}, time.Now())
		got := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionPaused)
		if got.GetReason() != c.wantReason {
			t.Errorf("paused for %s (by user %v): condition %v, want reason %q", c.reason, c.byUser, got, c.wantReason)
		}
	}
	// Leaving the pause removes the condition.
	st := &apiv1.VirtualMachineInstanceStatus{}
	setPausedCondition(st, &launcherpb.DomainStatus{Exists: true, State: statePaused, Reason: "User", PausedByUser: true}, time.Now())
	setPausedCondition(st, &launcherpb.DomainStatus{Exists: true, State: statePaused, Reason: "Crashed"}, time.Now())
	if c := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionPaused); c != nil {
		t.Errorf("condition kept: %v", c)
	}
}

// setReason is a status mutation for the tests.
func setReason(reason string) func(*apiv1.VirtualMachineInstanceStatus, time.Time) {
	return func(st *apiv1.VirtualMachineInstanceStatus, _ time.Time) { st.Reason = reason }
}

// A conflict means someone else wrote first: the status is read again
// and the change applied to what they wrote, never over it.
func TestWriteStatusRetriesOnTheFreshCopyAfterAConflict(t *testing.T) {
	u := newUnit(t)
	cached := u.create("w")
	u.vmis.meddle = func(v *apiv1.VirtualMachineInstance) { v.Status.Message = "written by the controller" }
	u.vmis.meddles = 1
	out, err := u.a.writeStatus(context.Background(), cached, setReason("Mine"))
	if err != nil {
		t.Fatal(err)
	}
	got := u.vmis.get("w")
	if got.Status.Reason != "Mine" || got.Status.Message != "written by the controller" || !proto.Equal(out, got) {
		t.Fatalf("stored status %v (returned %v): want both writers' changes", got.Status, out.GetStatus())
	}
	if updates, gets := u.vmis.counts(); updates != 2 || gets != 1 {
		t.Errorf("%d UpdateStatus and %d Get calls; want 2 and 1", updates, gets)
	}
}

// A final phase someone else wrote is never overwritten, and an unchanged
// status is not written at all.
func TestWriteStatusKeepsAFinalPhaseAndSkipsNoChange(t *testing.T) {
	u := newUnit(t)
	cached := u.create("f")
	u.vmis.meddle = func(v *apiv1.VirtualMachineInstance) {
		v.Status.Phase, v.Status.Reason = apiv1.PhaseFailed, "NodeUnresponsive"
	}
	u.vmis.meddles = 1
	out, err := u.a.writeStatus(context.Background(), cached, runningStatus(nil, true))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != apiv1.PhaseFailed || u.vmis.get("f").Status.Reason != "NodeUnresponsive" {
		t.Fatalf("final phase overwritten: returned %v, stored %v", out.Status, u.vmis.get("f").Status)
	}
	if updates, _ := u.vmis.counts(); updates != 1 {
		t.Errorf("%d UpdateStatus calls; want only the one that conflicted", updates)
	}

	cur := u.create("same")
	before, _ := u.vmis.counts()
	if _, err := u.a.writeStatus(context.Background(), cur, func(*apiv1.VirtualMachineInstanceStatus, time.Time) {}); err != nil {
		t.Fatal(err)
	}
	if after, _ := u.vmis.counts(); after != before {
		t.Error("an unchanged status was written")
	}
}

// A VMI deleted or replaced by one of the same name has nothing left to
// report to.
func TestWriteStatusToAVMIThatIsGone(t *testing.T) {
	u := newUnit(t)
	cached := u.create("g")
	u.vmis.mu.Lock()
	delete(u.vmis.vmis, "default/g")
	u.vmis.mu.Unlock()
	if _, err := u.a.writeStatus(context.Background(), cached, setReason("x")); !errors.Is(err, errVMIGone) {
		t.Fatalf("deleted VMI: %v, want errVMIGone", err)
	}

	cached = u.create("r")
	u.vmis.meddle = func(v *apiv1.VirtualMachineInstance) { v.Metadata.Uid = "uid-of-a-new-r" }
	u.vmis.meddles = 1
	if _, err := u.a.writeStatus(context.Background(), cached, setReason("x")); !errors.Is(err, errVMIGone) {
		t.Fatalf("replaced VMI: %v, want errVMIGone", err)
	}
	if got := u.vmis.get("r"); got.Status.Reason == "x" {
		t.Error("the new VMI of the same name got the old one's status")
	}
}

// Under a storm of other writers the write gives up after a bounded
// number of attempts.
func TestWriteStatusGivesUpAfterMaxAttempts(t *testing.T) {
	u := newUnit(t)
	cached := u.create("storm")
	u.vmis.meddle = func(v *apiv1.VirtualMachineInstance) { v.Status.Message += "." }
	u.vmis.meddles = maxStatusAttempts
	_, err := u.a.writeStatus(context.Background(), cached, setReason("late"))
	if err == nil || !strings.Contains(err.Error(), "still conflicting") {
		t.Fatalf("got %v, want a give-up error", err)
	}
	if updates, _ := u.vmis.counts(); updates != maxStatusAttempts {
		t.Errorf("%d attempts, want %d", updates, maxStatusAttempts)
	}
}
