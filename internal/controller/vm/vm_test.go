package vm

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

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
		evicted  bool   // an eviction shut the VMI down
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
		"RerunOnFailure/evicted restarts":               {strategy: "RerunOnFailure", phase: "Succeeded", ran: true, evicted: true, want: "delete", wantReqs: []string{"Start"}},
		"Manual/evicted left in place":                  {strategy: "Manual", phase: "Succeeded", ran: true, evicted: true, want: "release"},
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
				if c.evicted {
					vmi.Metadata.Annotations[apiv1.AnnotationEvicted] = "node-1"
				}
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
			if c.strategy == "RerunOnFailure" && c.phase == "Succeeded" && !c.evicted && len(f.vm(t).Status.StateChangeRequests) != 0 {
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
	ws := f.vmis.Store.Writes()
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
	for _, w := range f.vmis.Store.Writes() {
		if w.Op == "create" {
			creates++
		}
	}
	if creates != 1 {
		t.Fatalf("%d creates", creates)
	}
	f.refresh()
	f.reconcile(t)
	if n := len(f.vmis.Store.Writes()); n != 1 {
		t.Fatalf("writes after cache caught up: %d", n)
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
	vmi, _ := f.vmis.Store.Get(context.Background(), "default", "web")
	vmi.Status.Phase = apiv1.PhaseSucceeded
	if _, err := f.vmis.Store.Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.vmis.Store.ResetWrites()
	f.reconcile(t)
	// Handover: our finalizer dropped, so the store removes the VMI.
	if _, err := f.vmis.Store.Get(context.Background(), "default", "web"); err == nil {
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
	newVMI, err := f.vmis.Store.Get(context.Background(), "default", "web")
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
	vmi, _ := f.vmis.Store.Get(context.Background(), "default", "web")
	vmi.Status.Phase = apiv1.PhaseSucceeded
	vmi.Metadata.Finalizers = nil
	if _, err := f.vmis.Store.Update(context.Background(), vmi); err != nil {
		t.Fatal(err)
	}
	f.refresh()
	f.reconcile(t)
	if _, err := f.vms.Store.Get(context.Background(), "default", "web"); err == nil {
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

// A VM written with the deprecated running flag goes through the same
// decisions as its effective run strategy, and one that sets both fields
// (refused on write) is a terminal error that touches nothing.
func TestRunningFlagThroughSync(t *testing.T) {
	withFlag := func(running bool) *apiv1.VirtualMachine {
		vm := newVM("")
		vm.Spec.Running = &running //lint:ignore SA1019 the flag under test
		return vm
	}
	f := newFixture(t, withFlag(true), nil)
	f.reconcile(t)
	if got := f.vmiAction(); got != "start" {
		t.Errorf("running=true without an instance: %s, want start", got)
	}
	f = newFixture(t, withFlag(false), newVMI("Running", true))
	f.reconcile(t)
	if got := f.vmiAction(); got != "delete" {
		t.Errorf("running=false with a running instance: %s, want delete", got)
	}
	// A start request flips the flag the author used, not run_strategy.
	vm := withFlag(false)
	vm.Status.StateChangeRequests = []*apiv1.StateChangeRequest{startReq()}
	f = newFixture(t, vm, nil)
	f.reconcile(t)
	if running, set := f.vm(t).Spec.RunningFlag(); !set || !running || f.vm(t).Spec.RunStrategy != "" {
		t.Errorf("start flipped running=%v (set %v), run_strategy %q", running, set, f.vm(t).Spec.RunStrategy)
	}

	both := withFlag(true)
	both.Spec.RunStrategy = apiv1.RunStrategyAlways
	f = newFixture(t, both, nil)
	if _, err := f.c.Reconcile(context.Background(), "default/web"); !errors.Is(err, apiv1.ErrRunningAndRunStrategy) {
		t.Errorf("both fields: %v, want ErrRunningAndRunStrategy", err)
	}
	if got := f.vmiAction(); got != "none" {
		t.Errorf("both fields: %s, want no instance", got)
	}
}

// A changed eviction strategy reaches the running instance without a
// restart, and does not count as a template change.
func TestEvictionStrategyCarriedToRunningInstance(t *testing.T) {
	vm := newVM("Always")
	vm.Spec.Template.Spec.EvictionStrategy = apiv1.EvictionStrategyLiveMigrate
	f := newFixture(t, vm, newVMI("Running", true))
	f.reconcile(t)
	vmi := f.vmis.Get(t, "default", "web")
	if vmi.GetSpec().GetEvictionStrategy() != apiv1.EvictionStrategyLiveMigrate || vmi.GetMetadata().GetDeletionTimestamp() != nil {
		t.Fatalf("instance spec %v, deleting %v; want the new strategy, still running", vmi.GetSpec(), vmi.GetMetadata().GetDeletionTimestamp())
	}
	f.refresh()
	f.reconcile(t)
	if c := apiv1.FindCondition(f.vm(t).GetStatus().GetConditions(), apiv1.ConditionRestartRequired); c != nil {
		t.Errorf("RestartRequired after an eviction strategy change: %v", c)
	}
}
