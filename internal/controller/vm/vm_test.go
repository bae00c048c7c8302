package vm

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

type fixture struct {
	c      *Controller
	vmInf  *informer.Informer[*apiv1.VirtualMachine]
	vmiInf *informer.Informer[*apiv1.VirtualMachineInstance]
	vmSt   *memstore.Store[*apiv1.VirtualMachine]
	vmiSt  *memstore.Store[*apiv1.VirtualMachineInstance]
	now    time.Time
}

func newFixture(t *testing.T, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) *fixture {
	t.Helper()
	f := &fixture{now: t0}
	clock := func() time.Time { return f.now }
	var rev int64
	f.vmSt = memstore.New(store.VirtualMachines, &rev, clock)
	f.vmiSt = memstore.New(store.VirtualMachineInstances, &rev, clock)
	f.vmInf = informer.New[*apiv1.VirtualMachine](nil, store.ListOptions{}, nil)
	f.vmiInf = informer.New[*apiv1.VirtualMachineInstance](nil, store.ListOptions{}, nil)
	f.c = newController(Options{Clock: clock, Rand: func() float64 { return 0 }}, f.vmInf, f.vmiInf, f.vmSt, f.vmiSt,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.seed(vm, vmi)
	return f
}

// seed puts objects in the store and the caches, as a synced informer would.
func (f *fixture) seed(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) {
	if vm != nil {
		f.vmSt.Seed(vm)
		got, _ := f.vmSt.Get(context.Background(), vm.Metadata.Namespace, vm.Metadata.Name)
		f.vmInf.Fill(got)
	}
	if vmi != nil {
		f.vmiSt.Seed(vmi)
		got, _ := f.vmiSt.Get(context.Background(), vmi.Metadata.Namespace, vmi.Metadata.Name)
		f.vmiInf.Fill(got)
	}
	f.vmSt.ResetWrites()
	f.vmiSt.ResetWrites()
}

// refresh makes the caches show the store, as the informers would.
func (f *fixture) refresh() {
	vms, _, _ := f.vmSt.List(context.Background(), store.ListOptions{})
	f.vmInf.Fill(vms...)
	vmis, _, _ := f.vmiSt.List(context.Background(), store.ListOptions{})
	for _, v := range vmis {
		f.c.exp.CreationObserved(informer.Key(v))
		if v.Metadata.DeletionTimestamp != nil {
			f.c.exp.DeletionObserved(informer.Key(v))
		}
	}
	if len(vmis) == 0 {
		f.c.exp.DeletionObserved("default/web")
	}
	f.vmiInf.Fill(vmis...)
}

func (f *fixture) reconcile(t *testing.T) time.Duration {
	t.Helper()
	res, err := f.c.Reconcile(context.Background(), "default/web")
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return res.RequeueAfter
}

func (f *fixture) vm(t *testing.T) *apiv1.VirtualMachine {
	t.Helper()
	vm, err := f.vmSt.Get(context.Background(), "default", "web")
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// vmiAction summarises what the pass did to the VMI.
func (f *fixture) vmiAction() string {
	ws := f.vmiSt.Writes()
	if len(ws) == 0 {
		return "none"
	}
	switch w := ws[0]; {
	case w.Op == "create":
		return "start"
	case w.Op == "delete" || w.Object.GetMetadata().GetDeletionTimestamp() != nil:
		return "delete"
	case len(w.Object.GetMetadata().GetFinalizers()) == 0:
		return "release" // finalizer handover of a final VMI that stays
	default:
		return "update"
	}
}

func newVM(strategy string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vm-uid", Generation: 1,
			Finalizers: []string{apiv1.FinalizerVMController}},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: strategy,
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}},
				},
			},
		},
		Status: &apiv1.VirtualMachineStatus{},
	}
}

func newVMI(phase string, ran bool) *apiv1.VirtualMachineInstance {
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vmi-uid",
			Annotations:     map[string]string{apiv1.AnnotationVMGeneration: "1"},
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "web", Uid: "vm-uid", Controller: true}},
			Finalizers:      []string{apiv1.FinalizerVMController}},
		Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}}},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase,
			PhaseTransitionTimestamps: []*apiv1.PhaseTransitionTimestamp{{Phase: apiv1.PhasePending, Time: timestamppb.New(t0)}}},
	}
	if ran {
		vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps,
			&apiv1.PhaseTransitionTimestamp{Phase: apiv1.PhaseRunning, Time: timestamppb.New(t0)})
	}
	return vmi
}

func startReq() *apiv1.StateChangeRequest {
	return &apiv1.StateChangeRequest{Action: apiv1.StateChangeStart}
}
func stopReq(uid string) *apiv1.StateChangeRequest {
	return &apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: uid}
}

// One named case per row and column of KubeVirt's decision table
// (syncRunStrategy, behaviour reference §1.2).
func TestRunStrategyDecisionTable(t *testing.T) {
	type tc struct {
		strategy string
		phase    string // "" = no VMI
		ran      bool   // the VMI was Running once
		reqs     []*apiv1.StateChangeRequest
		statusRS string // status.run_strategy
		backoff  bool   // retry_after in the future
		want     string // start | delete | none | flip
		wantReqs []string
	}
	cases := map[string]tc{
		"Always/absent starts":                          {strategy: "Always", want: "start"},
		"Always/absent waits for backoff":               {strategy: "Always", backoff: true, want: "none"},
		"Always/running does nothing":                   {strategy: "Always", phase: "Running", ran: true, want: "none"},
		"Always/running with stop request restarts":     {strategy: "Always", phase: "Running", ran: true, reqs: []*apiv1.StateChangeRequest{stopReq("vmi-uid"), startReq()}, want: "delete"},
		"Always/running ignores stop for other uid":     {strategy: "Always", phase: "Running", ran: true, reqs: []*apiv1.StateChangeRequest{stopReq("old")}, want: "none"},
		"Always/succeeded is deleted":                   {strategy: "Always", phase: "Succeeded", ran: true, want: "delete"},
		"Always/failed is deleted":                      {strategy: "Always", phase: "Failed", ran: true, want: "delete"},
		"RerunOnFailure/first run starts":               {strategy: "RerunOnFailure", want: "start"},
		"RerunOnFailure/switched to it starts":          {strategy: "RerunOnFailure", statusRS: "Halted", want: "start"},
		"RerunOnFailure/absent after run stays stopped": {strategy: "RerunOnFailure", statusRS: "RerunOnFailure", want: "none"},
		"RerunOnFailure/start request starts":           {strategy: "RerunOnFailure", statusRS: "RerunOnFailure", reqs: []*apiv1.StateChangeRequest{startReq()}, want: "start"},
		"RerunOnFailure/start request waits backoff":    {strategy: "RerunOnFailure", statusRS: "RerunOnFailure", reqs: []*apiv1.StateChangeRequest{startReq()}, backoff: true, want: "none"},
		"RerunOnFailure/running does nothing":           {strategy: "RerunOnFailure", phase: "Running", ran: true, want: "none"},
		"RerunOnFailure/running with stop deletes":      {strategy: "RerunOnFailure", phase: "Running", ran: true, reqs: []*apiv1.StateChangeRequest{stopReq("vmi-uid")}, want: "delete"},
		"RerunOnFailure/succeeded deleted, no restart":  {strategy: "RerunOnFailure", phase: "Succeeded", ran: true, want: "delete"},
		"RerunOnFailure/failed deleted and restarts":    {strategy: "RerunOnFailure", phase: "Failed", ran: true, want: "delete", wantReqs: []string{"Start"}},
		"Manual/absent does nothing":                    {strategy: "Manual", want: "none"},
		"Manual/start request starts without backoff":   {strategy: "Manual", reqs: []*apiv1.StateChangeRequest{startReq()}, backoff: true, want: "start"},
		"Manual/running does nothing":                   {strategy: "Manual", phase: "Running", ran: true, want: "none"},
		"Manual/running with stop deletes":              {strategy: "Manual", phase: "Running", ran: true, reqs: []*apiv1.StateChangeRequest{stopReq("vmi-uid")}, want: "delete"},
		"Manual/succeeded left in place":                {strategy: "Manual", phase: "Succeeded", ran: true, want: "release"},
		"Manual/failed left in place":                   {strategy: "Manual", phase: "Failed", ran: true, want: "release"},
		"Manual/final with stop+start deleted":          {strategy: "Manual", phase: "Succeeded", ran: true, reqs: []*apiv1.StateChangeRequest{stopReq("vmi-uid"), startReq()}, want: "delete"},
		"Halted/absent does nothing":                    {strategy: "Halted", want: "none"},
		"Halted/start request flips to Always":          {strategy: "Halted", reqs: []*apiv1.StateChangeRequest{{Action: "Start", Data: map[string]string{"paused": "true"}}}, want: "flip"},
		"Halted/running is deleted":                     {strategy: "Halted", phase: "Running", ran: true, want: "delete"},
		"Halted/pending is deleted":                     {strategy: "Halted", phase: "Pending", want: "delete"},
		"Halted/succeeded is deleted":                   {strategy: "Halted", phase: "Succeeded", ran: true, want: "delete"},
		"Halted/failed is deleted":                      {strategy: "Halted", phase: "Failed", ran: true, want: "delete"},
		"Once/absent starts without backoff":            {strategy: "Once", backoff: true, want: "start"},
		"Once/running does nothing":                     {strategy: "Once", phase: "Running", ran: true, want: "none"},
		"Once/succeeded is not restarted":               {strategy: "Once", phase: "Succeeded", ran: true, want: "release"},
		"Once/failed is not restarted":                  {strategy: "Once", phase: "Failed", ran: true, want: "release"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			vm := newVM(c.strategy)
			vm.Status.StateChangeRequests = c.reqs
			vm.Status.RunStrategy = c.statusRS
			if c.backoff {
				vm.Status.StartFailure = &apiv1.VirtualMachineStartFailure{
					ConsecutiveFailCount: 1, LastFailedVmiUid: "older", RetryAfterTimestamp: timestamppb.New(t0.Add(10 * time.Second)),
				}
			}
			var vmi *apiv1.VirtualMachineInstance
			if c.phase != "" {
				vmi = newVMI(c.phase, c.ran)
			}
			f := newFixture(t, vm, vmi)
			requeue := f.reconcile(t)
			got := f.vmiAction()
			if c.want == "flip" {
				if got != "none" || f.vm(t).Spec.RunStrategy != apiv1.RunStrategyAlways {
					t.Fatalf("want spec flipped to Always, got action %s, strategy %s", got, f.vm(t).Spec.RunStrategy)
				}
				return
			}
			if got != c.want {
				t.Fatalf("VMI action %s, want %s", got, c.want)
			}
			if c.backoff && c.want == "none" && requeue != 10*time.Second {
				t.Fatalf("requeue after %v, want the remaining backoff 10s", requeue)
			}
			if c.wantReqs != nil {
				var acts []string
				for _, r := range f.vm(t).Status.StateChangeRequests {
					acts = append(acts, r.Action)
				}
				if fmt.Sprint(acts) != fmt.Sprint(c.wantReqs) {
					t.Fatalf("requests %v, want %v", acts, c.wantReqs)
				}
			}
			if c.strategy == "RerunOnFailure" && c.phase == "Succeeded" && len(f.vm(t).Status.StateChangeRequests) != 0 {
				t.Fatal("Succeeded RerunOnFailure VMI must not be restarted")
			}
		})
	}
}

func TestStartedVMIShape(t *testing.T) {
	vm := newVM("Halted")
	vm.Metadata.Generation = 3
	vm.Spec.RunStrategy = "Always"
	vm.Status.StateChangeRequests = []*apiv1.StateChangeRequest{{Action: "Start", Data: map[string]string{"paused": "true"}}}
	f := newFixture(t, vm, nil)
	f.reconcile(t)
	ws := f.vmiSt.Writes()
	if len(ws) != 1 || ws[0].Op != "create" {
		t.Fatalf("writes %v", ws)
	}
	vmi := ws[0].Object
	m := vmi.Metadata
	if m.Name != "web" || m.Labels["app"] != "web" || m.Annotations[apiv1.AnnotationVMGeneration] != "3" ||
		len(m.OwnerReferences) != 1 || m.OwnerReferences[0].Uid != "vm-uid" || !m.OwnerReferences[0].Controller ||
		len(m.Finalizers) != 1 || m.Finalizers[0] != apiv1.FinalizerVMController {
		t.Fatalf("metadata %v", m)
	}
	if !vmi.Spec.Paused || vmi.Status.Phase != apiv1.PhasePending {
		t.Fatalf("spec/status %v %v", vmi.Spec, vmi.Status)
	}
	if ps := f.vm(t).Status.PrintableStatus; ps != apiv1.PrintableStarting {
		t.Fatalf("printable %s", ps)
	}
}

// A second pass before the cache shows the new VMI must not create again.
func TestExpectationsPreventDoubleCreate(t *testing.T) {
	f := newFixture(t, newVM("Always"), nil)
	f.reconcile(t)
	f.reconcile(t)
	creates := 0
	for _, w := range f.vmiSt.Writes() {
		if w.Op == "create" {
			creates++
		}
	}
	if creates != 1 {
		t.Fatalf("%d creates", creates)
	}
	f.refresh()
	f.reconcile(t)
	if n := len(f.vmiSt.Writes()); n != 1 {
		t.Fatalf("writes after cache caught up: %d", n)
	}
}

func TestCrashLoopBackoffAndReset(t *testing.T) {
	f := newFixture(t, newVM("Always"), newVMI(apiv1.PhaseFailed, false))
	f.reconcile(t)
	vm := f.vm(t)
	sf := vm.Status.StartFailure
	if sf.GetConsecutiveFailCount() != 1 || sf.LastFailedVmiUid != "vmi-uid" || !sf.RetryAfterTimestamp.AsTime().Equal(t0.Add(10*time.Second)) {
		t.Fatalf("start failure %v", sf)
	}
	if vm.Status.PrintableStatus != apiv1.PrintableCrashLoopBackOff {
		t.Fatalf("printable %s", vm.Status.PrintableStatus)
	}
	// The failed VMI was released and deleted in one write.
	if ws := f.vmiSt.Writes(); len(ws) != 1 || ws[0].Op != "delete" {
		t.Fatalf("vmi writes %v", ws)
	}
	// Gone from the cache: no start before the backoff ends.
	f.refresh()
	f.vmiSt.ResetWrites()
	if d := f.reconcile(t); d != 10*time.Second || f.vmiAction() != "none" {
		t.Fatalf("started during backoff (requeue %v, action %s)", d, f.vmiAction())
	}
	f.now = t0.Add(10 * time.Second)
	f.refresh()
	f.reconcile(t)
	if f.vmiAction() != "start" {
		t.Fatal("not started after backoff")
	}
	// The same failed VMI is counted once; a new one that runs resets it.
	f.refresh()
	vmi, _ := f.vmiSt.Get(context.Background(), "default", "web")
	vmi.Status.Phase = apiv1.PhaseRunning
	vmi.Status.PhaseTransitionTimestamps = append(vmi.Status.PhaseTransitionTimestamps, &apiv1.PhaseTransitionTimestamp{Phase: "Running"})
	if _, err := f.vmiSt.Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.reconcile(t)
	if vm := f.vm(t); vm.Status.StartFailure != nil || vm.Status.PrintableStatus != apiv1.PrintableRunning {
		t.Fatalf("after running: %v %s", vm.Status.StartFailure, vm.Status.PrintableStatus)
	}
}

func TestStartBackoffMath(t *testing.T) {
	cases := []struct {
		n      int32
		r      float64
		lo, hi time.Duration
	}{
		{1, 0, 10 * time.Second, 10 * time.Second},
		{1, 0.999, 14 * time.Second, 15 * time.Second},
		{2, 0, 40 * time.Second, 40 * time.Second},
		{2, 0.999, 59 * time.Second, 60 * time.Second},
		{3, 0, 90 * time.Second, 90 * time.Second},
		{3, 0.999, 134 * time.Second, 135 * time.Second},
		{4, 0, 160 * time.Second, 160 * time.Second},
		{4, 0.999, 239 * time.Second, 240 * time.Second},
		{5, 0, 250 * time.Second, 250 * time.Second},
		{5, 0.999, 300 * time.Second, 300 * time.Second},
		{6, 0, 300 * time.Second, 300 * time.Second},
		{1000, 0.5, 300 * time.Second, 300 * time.Second},
		{0, 0.5, 0, 0},
	}
	for _, c := range cases {
		if d := StartBackoff(c.n, c.r); d < c.lo || d > c.hi {
			t.Errorf("StartBackoff(%d, %v) = %v, want [%v, %v]", c.n, c.r, d, c.lo, c.hi)
		}
	}
}

func TestStartFailureClearedForManualAndByRunning(t *testing.T) {
	vm := newVM("Manual")
	vm.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 3}
	f := newFixture(t, vm, nil)
	f.reconcile(t)
	if f.vm(t).Status.StartFailure != nil {
		t.Fatal("Manual keeps a start failure")
	}
	vm = newVM("Once")
	vm.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 1, LastFailedVmiUid: "x"}
	f = newFixture(t, vm, newVMI(apiv1.PhaseFailed, false))
	f.reconcile(t)
	if sf := f.vm(t).Status.StartFailure; sf.GetConsecutiveFailCount() != 2 {
		t.Fatalf("Once does not count failures: %v", sf)
	}
	if ps := f.vm(t).Status.PrintableStatus; ps != apiv1.PrintableCrashLoopBackOff {
		t.Fatalf("Once printable %s", ps)
	}
}

func TestRequestTrimming(t *testing.T) {
	// Restart of an Always VM: [Stop(uid), Start]; the old VMI goes away,
	// then Stop is popped, a new VMI starts, then Start is popped.
	vm := newVM("Always")
	vm.Status.StateChangeRequests = []*apiv1.StateChangeRequest{stopReq("vmi-uid"), startReq()}
	f := newFixture(t, vm, newVMI(apiv1.PhaseRunning, true))
	f.reconcile(t)
	if f.vmiAction() != "delete" || len(f.vm(t).Status.StateChangeRequests) != 2 {
		t.Fatalf("restart pass 1: %s %v", f.vmiAction(), f.vm(t).Status.StateChangeRequests)
	}
	if ps := f.vm(t).Status.PrintableStatus; ps != apiv1.PrintableStopping {
		t.Fatalf("printable while stopping: %s", ps)
	}
	// The node stops the guest; the VMI is final and deleting.
	f.refresh()
	vmi, _ := f.vmiSt.Get(context.Background(), "default", "web")
	vmi.Status.Phase = apiv1.PhaseSucceeded
	if _, err := f.vmiSt.Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.vmiSt.ResetWrites()
	f.reconcile(t)
	// Handover: our finalizer dropped, so the store removes the VMI.
	if _, err := f.vmiSt.Get(context.Background(), "default", "web"); err == nil {
		t.Fatal("final VMI not released")
	}
	f.refresh()
	f.reconcile(t) // VMI gone: Stop popped, new VMI started
	f.refresh()
	f.reconcile(t) // new VMI exists: Start popped
	vm = f.vm(t)
	if len(vm.Status.StateChangeRequests) != 0 {
		t.Fatalf("requests left: %v", vm.Status.StateChangeRequests)
	}
	newVMI, err := f.vmiSt.Get(context.Background(), "default", "web")
	if err != nil || newVMI.Metadata.Uid == "vmi-uid" {
		t.Fatalf("no new VMI: %v %v", err, newVMI.GetMetadata())
	}
}

func TestVMDeletionDeletesVMIFirst(t *testing.T) {
	vm := newVM("Always")
	vm.Metadata.DeletionTimestamp = timestamppb.New(t0)
	f := newFixture(t, vm, newVMI(apiv1.PhaseRunning, true))
	f.reconcile(t)
	if f.vmiAction() != "delete" || f.vm(t).Status.PrintableStatus != apiv1.PrintableTerminating {
		t.Fatalf("%s %s", f.vmiAction(), f.vm(t).Status.PrintableStatus)
	}
	if len(f.vm(t).Metadata.Finalizers) == 0 {
		t.Fatal("VM finalizer dropped while its VMI lives")
	}
	// VMI ends and goes; then the VM's finalizer goes and the VM with it.
	f.refresh()
	vmi, _ := f.vmiSt.Get(context.Background(), "default", "web")
	vmi.Status.Phase = apiv1.PhaseSucceeded
	vmi.Metadata.Finalizers = nil
	if _, err := f.vmiSt.Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.reconcile(t)
	if _, err := f.vmSt.Get(context.Background(), "default", "web"); err == nil {
		t.Fatal("VM still there after its VMI went")
	}
}

func TestFinalizerAddedAndOrphanCollected(t *testing.T) {
	vm := newVM("Halted")
	vm.Metadata.Finalizers = nil
	f := newFixture(t, vm, nil)
	f.reconcile(t)
	if fs := f.vm(t).Metadata.Finalizers; len(fs) != 1 {
		t.Fatalf("finalizers %v", fs)
	}
	// A VMI whose VM vanished is deleted.
	f = newFixture(t, nil, newVMI(apiv1.PhaseRunning, true))
	f.reconcile(t)
	if f.vmiAction() != "delete" {
		t.Fatalf("orphan: %s", f.vmiAction())
	}
}

func TestConditionsAndRestartRequired(t *testing.T) {
	vmi := newVMI(apiv1.PhaseRunning, true)
	vmi.Status.Conditions = []*apiv1.Condition{
		{Type: apiv1.ConditionReady, Status: "True", Reason: "GuestRunning"},
		{Type: apiv1.ConditionPaused, Status: "True", Reason: "PausedByUser"},
		{Type: apiv1.ConditionPodScheduled, Status: "True"},
		{Type: apiv1.ConditionSoftwareEmulation, Status: "True"},
	}
	vm := newVM("Always")
	vm.Metadata.Generation = 2
	vm.Spec.Template.Spec.Domain.Memory.Guest = "256Mi"
	f := newFixture(t, vm, vmi)
	f.reconcile(t)
	st := f.vm(t).Status
	has := func(typ, status string) bool { return apiv1.FindCondition(st.Conditions, typ).GetStatus() == status }
	if !has("Ready", "True") || !has("Paused", "True") || !has("SoftwareEmulation", "True") || !has("RestartRequired", "True") {
		t.Fatalf("conditions %v", st.Conditions)
	}
	if apiv1.FindCondition(st.Conditions, apiv1.ConditionPodScheduled) != nil {
		t.Fatal("PodScheduled=True mirrored")
	}
	if st.PrintableStatus != apiv1.PrintablePaused || !st.Ready || !st.Created || st.ObservedGeneration != 1 || st.DesiredGeneration != 2 {
		t.Fatalf("status %v", st)
	}
	// A failing action shows in Failure.
	f = newFixture(t, newVM("Always"), nil)
	f.vmiSt.FailNext("create", fmt.Errorf("disk full"))
	if _, err := f.c.Reconcile(context.Background(), "default/web"); err == nil {
		t.Fatal("create failure not returned")
	}
	fc := apiv1.FindCondition(f.vm(t).Status.Conditions, apiv1.ConditionFailure)
	if fc.GetStatus() != "True" || fc.GetReason() != "FailedCreate" {
		t.Fatalf("failure condition %v", fc)
	}
	f.refresh()
	f.reconcile(t)
	if apiv1.FindCondition(f.vm(t).Status.Conditions, apiv1.ConditionFailure) != nil {
		t.Fatal("Failure not cleared after a clean pass")
	}
}

// Printable statuses in KubeVirt's evaluation order (behaviour §2.1).
func TestPrintableStatusOrder(t *testing.T) {
	now := timestamppb.New(t0)
	withCond := func(phase string, c ...*apiv1.Condition) *apiv1.VirtualMachineInstance {
		v := newVMI(phase, phase == "Running")
		v.Status.Conditions = c
		return v
	}
	deleting := newVMI("Running", true)
	deleting.Metadata.DeletionTimestamp = now
	terminatingVM := newVM("Always")
	terminatingVM.Metadata.DeletionTimestamp = now
	migratingVMI := newVMI("Running", true)
	migratingVMI.Status.MigrationState = &apiv1.MigrationState{StartTimestamp: now}
	crashVM := newVM("Always")
	crashVM.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 1}
	crashManual := newVM("Manual")
	crashManual.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 1}
	cases := []struct {
		name     string
		vm       *apiv1.VirtualMachine
		vmi      *apiv1.VirtualMachineInstance
		add, del bool
		want     string
	}{
		{"terminating beats everything", terminatingVM, deleting, false, false, "Terminating"},
		{"stopping: VMI deleting", newVM("Always"), deleting, false, false, "Stopping"},
		{"stopping: delete expected", newVM("Always"), newVMI("Running", true), false, true, "Stopping"},
		{"migrating", newVM("Always"), migratingVMI, false, false, "Migrating"},
		{"paused", newVM("Always"), withCond("Running", &apiv1.Condition{Type: "Paused", Status: "True"}), false, false, "Paused"},
		{"running", newVM("Always"), newVMI("Running", true), false, false, "Running"},
		{"data volume error", newVM("Always"), withCond("Pending", &apiv1.Condition{Type: "Synchronized", Status: "False", Reason: "DataVolumeError"}), false, false, "DataVolumeError"},
		{"unschedulable", newVM("Always"), withCond("Pending", &apiv1.Condition{Type: "PodScheduled", Status: "False", Reason: "Unschedulable"}), false, false, "ErrorUnschedulable"},
		{"provisioning", newVM("Always"), withCond("Pending", &apiv1.Condition{Type: "Provisioning", Status: "True"}), false, false, "Provisioning"},
		{"starting: create expected", newVM("Always"), nil, true, false, "Starting"},
		{"starting: scheduled", newVM("Always"), newVMI("Scheduled", false), false, false, "Starting"},
		{"crash loop", crashVM, nil, false, false, "CrashLoopBackOff"},
		{"no crash loop for Manual", crashManual, nil, false, false, "Stopped"},
		{"stopped: final", newVM("Once"), newVMI("Succeeded", true), false, false, "Stopped"},
		{"stopped: absent", newVM("Halted"), nil, false, false, "Stopped"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := PrintableStatus(c.vm, c.vmi, c.add, c.del); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
}

// The VMI's deletion can reach the cache before our VM status write does;
// a pass on that stale VM must not start a VMI inside the backoff it just
// recorded.
func TestStaleVMCacheDoesNotSkipBackoff(t *testing.T) {
	f := newFixture(t, newVM("Always"), newVMI(apiv1.PhaseFailed, false))
	f.reconcile(t)
	if f.vm(t).Status.GetStartFailure().GetConsecutiveFailCount() != 1 {
		t.Fatal("failure not recorded")
	}
	// Only the VMI cache catches up.
	f.vmiInf.Fill()
	f.c.exp.DeletionObserved("default/web")
	f.vmiSt.ResetWrites()
	if d := f.reconcile(t); d == 0 {
		t.Fatal("no requeue on a stale VM cache")
	}
	if f.vmiAction() != "none" {
		t.Fatalf("acted on a stale VM: %s", f.vmiAction())
	}
	// Once the VM cache catches up, the backoff holds.
	f.refresh()
	if d := f.reconcile(t); d != 10*time.Second || f.vmiAction() != "none" {
		t.Fatalf("requeue %v action %s", d, f.vmiAction())
	}
}

// The VM keeps why its last instance failed: the instance is deleted
// before the retry, and users need the cause (e.g. libvirt's message).
func TestStartFailureKeepsCause(t *testing.T) {
	vmi := newVMI(apiv1.PhaseFailed, false)
	vmi.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionSynchronized, Status: "False",
		Reason: "SyncFailed", Message: "unable to stat: /images/vmlinuz: No such file or directory"}}
	f := newFixture(t, newVM("Always"), vmi)
	f.reconcile(t)
	sf := f.vm(t).Status.StartFailure
	if sf.GetLastFailureReason() != "SyncFailed" || sf.GetLastFailureMessage() != "unable to stat: /images/vmlinuz: No such file or directory" {
		t.Fatalf("start failure %v", sf)
	}
	vmi = newVMI(apiv1.PhaseFailed, false)
	vmi.Status.Reason, vmi.Status.Message = "GuestCrashed", "the guest kernel panicked"
	f = newFixture(t, newVM("Always"), vmi)
	f.reconcile(t)
	if sf := f.vm(t).Status.StartFailure; sf.GetLastFailureReason() != "GuestCrashed" || sf.GetLastFailureMessage() != "the guest kernel panicked" {
		t.Fatalf("start failure %v", sf)
	}
}
