package apiv1

import (
	"errors"
	"testing"
	"time"
)

func TestEffectiveRunStrategy(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name string
		spec *VirtualMachineSpec
		want string
		err  error
	}{
		{"nil spec", nil, RunStrategyHalted, nil},
		{"neither set", &VirtualMachineSpec{}, RunStrategyHalted, nil},
		{"running true", &VirtualMachineSpec{Running: &yes}, RunStrategyAlways, nil},
		{"running false", &VirtualMachineSpec{Running: &no}, RunStrategyHalted, nil},
		{"run strategy", &VirtualMachineSpec{RunStrategy: RunStrategyOnce}, RunStrategyOnce, nil},
		{"both", &VirtualMachineSpec{Running: &yes, RunStrategy: RunStrategyManual}, "", ErrRunningAndRunStrategy},
	} {
		got, err := c.spec.EffectiveRunStrategy()
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: got %q, %v; want %q, %v", c.name, got, err, c.want, c.err)
		}
	}
}

func TestSetRunningKeepsTheAuthorsField(t *testing.T) {
	yes := true
	vm := &VirtualMachine{Spec: &VirtualMachineSpec{Running: &yes}}
	vm.SetRunning(false)
	if vm.Spec.Running == nil || *vm.Spec.Running || vm.Spec.RunStrategy != "" {
		t.Errorf("running flag VM: running=%v run_strategy=%q", vm.Spec.Running, vm.Spec.RunStrategy)
	}
	vm = &VirtualMachine{Spec: &VirtualMachineSpec{RunStrategy: RunStrategyHalted}}
	vm.SetRunning(true)
	if vm.Spec.Running != nil || vm.Spec.RunStrategy != RunStrategyAlways {
		t.Errorf("run_strategy VM: running=%v run_strategy=%q", vm.Spec.Running, vm.Spec.RunStrategy)
	}
	vm = &VirtualMachine{}
	vm.SetRunning(false)
	if vm.Spec.GetRunStrategy() != RunStrategyHalted {
		t.Errorf("VM without spec: run_strategy=%q", vm.Spec.GetRunStrategy())
	}
}

func TestGracePeriodSeconds(t *testing.T) {
	g := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		spec *VirtualMachineInstanceSpec
		want int64
	}{
		{nil, DefaultTerminationGracePeriodSeconds},
		{&VirtualMachineInstanceSpec{}, DefaultTerminationGracePeriodSeconds},
		{&VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: g(0)}, 0},
		{&VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: g(120)}, 120},
		{&VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: g(-5)}, 0},
	} {
		if got := c.spec.GracePeriodSeconds(); got != c.want {
			t.Errorf("%v: got %d, want %d", c.spec, got, c.want)
		}
	}
}

func TestIsControlledBy(t *testing.T) {
	vm := &VirtualMachine{Metadata: &ObjectMeta{Name: "a", Uid: "uid-1"}}
	ref := func(kind, uid string, controller bool) *VirtualMachineInstance {
		return &VirtualMachineInstance{Metadata: &ObjectMeta{Name: "a",
			OwnerReferences: []*OwnerReference{{Kind: kind, Uid: uid, Controller: controller}}}}
	}
	for _, c := range []struct {
		name string
		vmi  *VirtualMachineInstance
		want bool
	}{
		{"bare VMI", &VirtualMachineInstance{Metadata: &ObjectMeta{Name: "a"}}, false},
		{"controlled", ref(KindVirtualMachine, "uid-1", true), true},
		{"earlier VM of the same name", ref(KindVirtualMachine, "uid-0", true), false},
		{"owner but not controller", ref(KindVirtualMachine, "uid-1", false), false},
		{"other kind", ref("VirtualMachinePool", "uid-1", true), false},
	} {
		if got := IsControlledBy(c.vmi, vm); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	if IsControlledBy(&VirtualMachineInstance{Metadata: &ObjectMeta{}}, &VirtualMachine{Metadata: &ObjectMeta{}}) {
		t.Error("empty uids match")
	}
}

func TestSetPhaseRecordsTransitionsOnce(t *testing.T) {
	t0 := time.Unix(100, 0)
	st := &VirtualMachineInstanceStatus{}
	st.SetPhase(PhaseScheduled, t0)
	st.SetPhase(PhaseScheduled, t0.Add(time.Second))
	st.SetPhase(PhaseRunning, t0.Add(2*time.Second))
	if st.Phase != PhaseRunning || len(st.PhaseTransitionTimestamps) != 2 {
		t.Fatalf("phase %s, transitions %v", st.Phase, st.PhaseTransitionTimestamps)
	}
	if got := st.PhaseTransitionTimestamps[1].Time.AsTime(); !got.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("Running at %v", got)
	}
}

func TestFailOnNodeTouchesOnlyThatInstanceThere(t *testing.T) {
	now := time.Unix(100, 0)
	vmi := func(uid, node, phase string) *VirtualMachineInstance {
		return &VirtualMachineInstance{Metadata: &ObjectMeta{Uid: uid}, Status: &VirtualMachineInstanceStatus{NodeName: node, Phase: phase}}
	}
	for _, c := range []struct {
		name string
		vmi  *VirtualMachineInstance
		want bool
	}{
		{"that instance there", vmi("u1", "n1", PhaseRunning), true},
		{"a newer instance", vmi("u2", "n1", PhaseRunning), false},
		{"moved elsewhere", vmi("u1", "n2", PhaseScheduled), false},
		{"already ended", vmi("u1", "n1", PhaseSucceeded), false},
		{"no status", &VirtualMachineInstance{Metadata: &ObjectMeta{Uid: "u1"}}, false},
	} {
		before := c.vmi.GetStatus().GetPhase()
		got := c.vmi.FailOnNode("u1", "n1", "NodeUnresponsive", "gone", now)
		st := c.vmi.GetStatus()
		switch {
		case got != c.want:
			t.Errorf("%s: FailOnNode = %v", c.name, got)
		case got && (st.GetPhase() != PhaseFailed || st.GetReason() != "NodeUnresponsive" || st.GetMessage() != "gone"):
			t.Errorf("%s: status %v", c.name, st)
		case !got && st.GetPhase() != before:
			t.Errorf("%s: phase changed to %s", c.name, st.GetPhase())
		}
	}
}
