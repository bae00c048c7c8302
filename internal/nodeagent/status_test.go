package nodeagent

import (
	"testing"
	"time"

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
