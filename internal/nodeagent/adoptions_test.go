package nodeagent

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Before its take-over an adopted domain is not the instance's: the
// handler sees no domain (and so never stops or removes it); after, it
// is the instance's like any other.
func TestNotTakenOver(t *testing.T) {
	adopted := &state.VMI{UID: "vmi-1", AdoptedUUID: "dom-uuid"}
	plain := &state.VMI{UID: "vmi-1"}
	foreign := &launcherpb.DomainStatus{Exists: true, Name: "legacy", State: "Running"}
	taken := &launcherpb.DomainStatus{Exists: true, Name: "legacy", State: "Running", VmiUid: "vmi-1"}
	if got := notTakenOver(adopted, foreign); got.GetExists() {
		t.Errorf("a domain not taken over yet: %v", got)
	}
	if got := notTakenOver(adopted, taken); got != taken {
		t.Errorf("a domain taken over: %v", got)
	}
	if got := notTakenOver(plain, foreign); got != foreign {
		t.Errorf("a domain of an instance that adopts nothing: %v", got)
	}
	if got := notTakenOver(adopted, nil); got.GetExists() {
		t.Errorf("no domain: %v", got)
	}
}

func TestAdoptedInstanceIsNotLiveMigratable(t *testing.T) {
	vmi := &apiv1.VirtualMachineInstance{Spec: &apiv1.VirtualMachineInstanceSpec{}}
	if c := liveMigratable(vmi, &state.VMI{AdoptedUUID: "u"}); c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonAdopted {
		t.Errorf("adopted: %v", c)
	}
	if c := liveMigratable(vmi, &state.VMI{}); c.GetStatus() != apiv1.ConditionTrue {
		t.Errorf("not adopted: %v", c)
	}
}
