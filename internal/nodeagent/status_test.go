package nodeagent

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
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
	out, err := u.a.status.Write(context.Background(), cached, setReason("Mine"))
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
	out, err := u.a.status.Write(context.Background(), cached, runningStatus(nil, true))
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
	if _, err := u.a.status.Write(context.Background(), cur, func(*apiv1.VirtualMachineInstanceStatus, time.Time) {}); err != nil {
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
	if _, err := u.a.status.Write(context.Background(), cached, setReason("x")); !errors.Is(err, vmistatus.ErrGone) {
		t.Fatalf("deleted VMI: %v, want vmistatus.ErrGone", err)
	}

	cached = u.create("r")
	u.vmis.meddle = func(v *apiv1.VirtualMachineInstance) { v.Metadata.Uid = "uid-of-a-new-r" }
	u.vmis.meddles = 1
	if _, err := u.a.status.Write(context.Background(), cached, setReason("x")); !errors.Is(err, vmistatus.ErrGone) {
		t.Fatalf("replaced VMI: %v, want vmistatus.ErrGone", err)
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
	u.vmis.meddles = vmistatus.MaxAttempts
	_, err := u.a.status.Write(context.Background(), cached, setReason("late"))
	if err == nil || !strings.Contains(err.Error(), "still conflicting") {
		t.Fatalf("got %v, want a give-up error", err)
	}
	if updates, _ := u.vmis.counts(); updates != vmistatus.MaxAttempts {
		t.Errorf("%d attempts, want %d", updates, vmistatus.MaxAttempts)
	}
}

// TestInterfaceStatuses: the status lists the spec's interfaces in its
// order with its names and MACs, and what the launcher found for each;
// what the API would refuse is left out; a launcher that has not looked
// yet leaves the addresses the status had.
func TestInterfaceStatuses(t *testing.T) {
	spec := &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{Interfaces: []*apiv1.Interface{
		{Name: "default", MacAddress: "02:00:00:00:00:01"},
		{Name: "lan", MacAddress: "02:00:00:00:00:02"},
		{Name: "nat", MacAddress: "02:00:00:00:00:03"},
	}}}}
	dom := &launcherpb.DomainStatus{Exists: true, State: stateRunning, Interfaces: []*apiv1.InterfaceStatus{
		{Name: "nat", MacAddress: "02:00:00:00:00:03", Info: "no DHCP lease for 02:00:00:00:00:03"},
		{Name: "default", MacAddress: "02:00:00:00:00:01", IpAddress: "10.0.2.15", IpAddresses: []string{"10.0.2.15", "not-an-ip", "fec0::5"},
			Source: apiv1.InterfaceSourceAgent, InterfaceName: "eth0"},
		{Name: "lan", MacAddress: "02:00:00:00:00:02", IpAddresses: []string{"192.0.2.7"}, Source: "guess", InterfaceName: "bad\x00name", Info: "x\x01y"},
		{Name: "gone", MacAddress: "02:00:00:00:00:09", IpAddresses: []string{"192.0.2.9"}},
	}}
	got := interfaceStatuses(spec, dom, nil)
	want := []*apiv1.InterfaceStatus{
		{Name: "default", MacAddress: "02:00:00:00:00:01", IpAddress: "10.0.2.15", IpAddresses: []string{"10.0.2.15", "fec0::5"},
			Source: apiv1.InterfaceSourceAgent, InterfaceName: "eth0"},
		{Name: "lan", MacAddress: "02:00:00:00:00:02", IpAddress: "192.0.2.7", IpAddresses: []string{"192.0.2.7"}, Info: "x\uFFFDy"},
		{Name: "nat", MacAddress: "02:00:00:00:00:03", Info: "no DHCP lease for 02:00:00:00:00:03"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v", got)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("interface %d = %v, want %v", i, got[i], want[i])
		}
	}
	if errs := validation.ValidateVirtualMachineInstanceStatus(&apiv1.VirtualMachineInstanceStatus{Interfaces: got}, nil); len(errs) > 0 {
		t.Errorf("the API refuses it: %v", errs)
	}

	// A launcher that has not looked yet: the status keeps what it had
	// for the same interface, and only the spec's name and MAC for the
	// rest (a previous address of another MAC is not this interface's).
	prev := []*apiv1.InterfaceStatus{
		{Name: "default", MacAddress: "02:00:00:00:00:01", IpAddress: "10.0.2.15", IpAddresses: []string{"10.0.2.15"}, Source: apiv1.InterfaceSourceAgent},
		{Name: "lan", MacAddress: "02:00:00:00:00:99", IpAddress: "192.0.2.99", IpAddresses: []string{"192.0.2.99"}, Source: apiv1.InterfaceSourceARP},
	}
	got = interfaceStatuses(spec, &launcherpb.DomainStatus{Exists: true, State: stateRunning}, prev)
	if !proto.Equal(got[0], prev[0]) {
		t.Errorf("default = %v, want the previous %v", got[0], prev[0])
	}
	for _, s := range got[1:] {
		if s.GetIpAddress() != "" || s.GetSource() != "" {
			t.Errorf("%s kept %v", s.GetName(), s)
		}
	}
	if got[1].GetMacAddress() != "02:00:00:00:00:02" {
		t.Errorf("lan's MAC %q is not the spec's", got[1].GetMacAddress())
	}
	if got := interfaceStatuses(&apiv1.VirtualMachineInstanceSpec{}, dom, prev); got != nil {
		t.Errorf("no interfaces in the spec: %v", got)
	}
}

func withInterfaces() vmiOption {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Spec.Networks = []*apiv1.Network{
			{Name: "default", User: &apiv1.UserNetwork{}},
			{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: "br0"}},
		}
		v.Spec.Domain.Devices.Interfaces = []*apiv1.Interface{
			{Name: "default", MacAddress: "02:00:00:00:00:01"},
			{Name: "lan", MacAddress: "02:00:00:00:00:02"},
		}
	}
}

// TestRunningStatusCarriesInterfaces: a started VMI lists its interfaces
// by the spec at once; the launcher's addresses arrive with its event and
// pass the API's validation.
func TestRunningStatusCarriesInterfaces(t *testing.T) {
	h, a := newStarted(t, "web", withInterfaces())
	st := h.getVMI("web").GetStatus()
	if st.GetPhase() != apiv1.PhaseRunning || len(st.GetInterfaces()) != 2 {
		t.Fatalf("status %v", st)
	}
	for i, want := range []string{"default/02:00:00:00:00:01", "lan/02:00:00:00:00:02"} {
		if s := st.GetInterfaces()[i]; s.GetName()+"/"+s.GetMacAddress() != want || s.GetIpAddress() != "" {
			t.Errorf("interface %d = %v, want %s without addresses", i, s, want)
		}
	}

	h.fake.SetInterfaces(domainOf("web"), []*apiv1.InterfaceStatus{
		{Name: "default", MacAddress: "02:00:00:00:00:01", IpAddress: "10.0.2.15", IpAddresses: []string{"10.0.2.15", "fec0::5054:ff:fe00:1"},
			Source: apiv1.InterfaceSourceAgent, InterfaceName: "eth0"},
		{Name: "lan", MacAddress: "02:00:00:00:00:02", Info: "no neighbour entry for 02:00:00:00:00:02; the guest agent reports no address for 02:00:00:00:00:02"},
	}, true)
	h.reconcile(a, "web")
	got := h.getVMI("web").GetStatus().GetInterfaces()
	if got[0].GetIpAddress() != "10.0.2.15" || got[0].GetSource() != apiv1.InterfaceSourceAgent || got[0].GetInterfaceName() != "eth0" ||
		len(got[0].GetIpAddresses()) != 2 || !strings.HasPrefix(got[1].GetInfo(), "no neighbour entry") {
		t.Errorf("interfaces after the launcher found addresses: %v", got)
	}
}
