package apiserver

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

var webKey = &apiv1.ObjectKey{Name: "web"}

// createVM creates VM "web" with strategy and gives it the status a VM
// controller would have written, which no verb may lose.
func createVM(t *testing.T, f *fixture, strategy string) *apiv1.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	in := validVM("web")
	in.Spec.RunStrategy = strategy
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: in}); err != nil {
		t.Fatal(err)
	}
	vm, err := f.st.VMs.GuaranteedUpdate(ctx, "default", "web", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Status.PrintableStatus = apiv1.PrintableCrashLoopBackOff
		vm.Status.ObservedGeneration = 1
		vm.Status.StartFailure = &apiv1.VirtualMachineStartFailure{
			ConsecutiveFailCount: 3, LastFailedVmiUid: "gone", RetryAfterTimestamp: timestamppb.New(f.now.Add(time.Minute)),
		}
		return vm, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// createVMI creates the instance of vm in phase, owned by ownerUID, with the
// default grace period, as the VM controller would.
func createVMI(t *testing.T, f *fixture, ownerUID, phase string) *apiv1.VirtualMachineInstance {
	t.Helper()
	grace := int64(30)
	vmi, err := f.st.VMIs.Create(context.Background(), &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{
			Namespace: "default", Name: "web",
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "web", Uid: ownerUID, Controller: true}},
		},
		Spec:   &apiv1.VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: &grace},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: "host-1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return vmi
}

func getVM(t *testing.T, f *fixture) *apiv1.VirtualMachine {
	t.Helper()
	vm, err := f.vms.Get(context.Background(), &apiv1.GetVirtualMachineRequest{Key: webKey})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

func getVMI(t *testing.T, f *fixture) *apiv1.VirtualMachineInstance {
	t.Helper()
	vmi, err := f.vmis.Get(context.Background(), &apiv1.GetVirtualMachineInstanceRequest{Key: webKey})
	if err != nil {
		t.Fatal(err)
	}
	return vmi
}

// wantControllerStatusKept checks the status fields the API does not own.
func wantControllerStatusKept(t *testing.T, vm *apiv1.VirtualMachine) {
	t.Helper()
	if vm.Status.PrintableStatus != apiv1.PrintableCrashLoopBackOff || vm.Status.ObservedGeneration != 1 {
		t.Errorf("controller status overwritten: %v", vm.Status)
	}
}

func wantRefused(t *testing.T, err error, c codes.Code, msg string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != c || (msg != "" && st.Message() != msg) {
		t.Fatalf("want %v %q, got %v", c, msg, err)
	}
}

func wantRequests(t *testing.T, vm *apiv1.VirtualMachine, want ...*apiv1.StateChangeRequest) {
	t.Helper()
	got := vm.Status.StateChangeRequests
	if len(got) != len(want) {
		t.Fatalf("state change requests %v, want %v", got, want)
	}
	for i := range want {
		if !proto.Equal(got[i], want[i]) {
			t.Fatalf("state change requests %v, want %v", got, want)
		}
	}
}

func TestStartHaltedFlipsToAlways(t *testing.T) {
	f := newFixture(t)
	createVM(t, f, apiv1.RunStrategyHalted)
	out, err := f.vms.Start(context.Background(), &apiv1.StartVirtualMachineRequest{Key: webKey})
	if err != nil {
		t.Fatal(err)
	}
	stored := getVM(t, f)
	if !proto.Equal(out, stored) {
		t.Fatalf("answer %v differs from stored %v", out, stored)
	}
	if stored.Spec.RunStrategy != apiv1.RunStrategyAlways || stored.Metadata.Generation != 2 {
		t.Fatalf("spec %v, generation %d", stored.Spec.RunStrategy, stored.Metadata.Generation)
	}
	if stored.Status.StartFailure != nil || len(stored.Status.StateChangeRequests) != 0 {
		t.Fatalf("status %v", stored.Status)
	}
	wantControllerStatusKept(t, stored)
}

func TestStartHaltedPausedQueuesPausedStart(t *testing.T) {
	f := newFixture(t)
	createVM(t, f, apiv1.RunStrategyHalted)
	if _, err := f.vms.Start(context.Background(), &apiv1.StartVirtualMachineRequest{Key: webKey, Paused: true}); err != nil {
		t.Fatal(err)
	}
	vm := getVM(t, f)
	if vm.Spec.RunStrategy != apiv1.RunStrategyHalted || vm.Metadata.Generation != 1 {
		t.Fatalf("spec changed: %v (generation %d)", vm.Spec.RunStrategy, vm.Metadata.Generation)
	}
	wantRequests(t, vm, &apiv1.StateChangeRequest{Action: apiv1.StateChangeStart, Data: map[string]string{"paused": "true"}})
	wantControllerStatusKept(t, vm)
}

func TestStopAlwaysFlipsToHalted(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyAlways)
	vmi := createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	if _, err := f.vms.Stop(context.Background(), &apiv1.StopVirtualMachineRequest{Key: webKey}); err != nil {
		t.Fatal(err)
	}
	stored := getVM(t, f)
	if stored.Spec.RunStrategy != apiv1.RunStrategyHalted || stored.Status.StartFailure != nil {
		t.Fatalf("after stop: %v", stored)
	}
	wantControllerStatusKept(t, stored)
	// No grace period asked for: the instance is left alone.
	if got := getVMI(t, f); !proto.Equal(got, vmi) {
		t.Fatalf("instance written: %v", got)
	}
}

func TestRestartRerunOnFailureQueuesStopStart(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyRerunOnFailure)
	vmi := createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	if _, err := f.vms.Restart(context.Background(), &apiv1.RestartVirtualMachineRequest{Key: webKey}); err != nil {
		t.Fatal(err)
	}
	stored := getVM(t, f)
	wantRequests(t, stored,
		&apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: vmi.Metadata.Uid},
		&apiv1.StateChangeRequest{Action: apiv1.StateChangeStart})
	if stored.Spec.RunStrategy != apiv1.RunStrategyRerunOnFailure || stored.Metadata.Generation != 1 || stored.Status.StartFailure != nil {
		t.Fatalf("after restart: %v", stored)
	}
	wantControllerStatusKept(t, stored)

	// A second restart before the controller took the first: §1.3 refuses.
	_, err := f.vms.Restart(context.Background(), &apiv1.RestartVirtualMachineRequest{Key: webKey})
	wantRefused(t, err, codes.FailedPrecondition, "unable to complete request: stop/start already underway")
}

func TestStartAlwaysRefused(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyAlways)
	_, err := f.vms.Start(context.Background(), &apiv1.StartVirtualMachineRequest{Key: webKey})
	wantRefused(t, err, codes.FailedPrecondition, "Always does not support manual start requests")
	if got := getVM(t, f); !proto.Equal(got, vm) {
		t.Fatalf("refused start wrote the VM: %v", got)
	}
	createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	_, err = f.vms.Start(context.Background(), &apiv1.StartVirtualMachineRequest{Key: webKey})
	wantRefused(t, err, codes.FailedPrecondition, "VM is already running")
}

func TestStopWithGracePeriodPatchesInstance(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyManual)
	vmi := createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	grace := int64(5)
	if _, err := f.vms.Stop(context.Background(), &apiv1.StopVirtualMachineRequest{Key: webKey, GracePeriodSeconds: &grace}); err != nil {
		t.Fatal(err)
	}
	got := getVMI(t, f)
	if got.Spec.GetTerminationGracePeriodSeconds() != 5 || got.Metadata.Generation != vmi.Metadata.Generation+1 {
		t.Fatalf("instance after stop: %v", got)
	}
	if !proto.Equal(got.Status, vmi.Status) {
		t.Fatalf("instance status changed: %v", got.Status)
	}
	stored := getVM(t, f)
	wantRequests(t, stored, &apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: vmi.Metadata.Uid})
	wantControllerStatusKept(t, stored)
}

func TestStopHaltedForceStop(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyHalted)
	vmi := createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	ctx := context.Background()

	// Not shorter than the instance's 30 s: refused, and nothing written.
	longer := int64(30)
	_, err := f.vms.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: webKey, GracePeriodSeconds: &longer})
	wantRefused(t, err, codes.FailedPrecondition, "Halted only supports manual stop requests with a shorter graceperiod")
	if got := getVMI(t, f); !proto.Equal(got, vmi) {
		t.Fatalf("refused stop patched the instance: %v", got)
	}

	force := int64(0)
	if _, err := f.vms.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: webKey, GracePeriodSeconds: &force}); err != nil {
		t.Fatal(err)
	}
	if g := getVMI(t, f).Spec.GetTerminationGracePeriodSeconds(); g != 0 {
		t.Fatalf("instance grace %d", g)
	}
	wantRequests(t, getVM(t, f), &apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: vmi.Metadata.Uid})
}

func TestRestartForce(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyAlways)
	createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	ctx := context.Background()
	five := int64(5)
	_, err := f.vms.Restart(ctx, &apiv1.RestartVirtualMachineRequest{Key: webKey, GracePeriodSeconds: &five})
	wantRefused(t, err, codes.InvalidArgument, "")

	zero := int64(0)
	if _, err := f.vms.Restart(ctx, &apiv1.RestartVirtualMachineRequest{Key: webKey, GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if g := getVMI(t, f).Spec.GetTerminationGracePeriodSeconds(); g != 1 {
		t.Fatalf("force restart left instance grace %d, want 1", g)
	}
	if n := len(getVM(t, f).Status.StateChangeRequests); n != 2 {
		t.Fatalf("%d requests queued", n)
	}
}

// racingVMs lets another writer change the VM between the API's read and
// its compare-and-swap write.
type racingVMs struct {
	store.Store[*apiv1.VirtualMachine]
	race func()
}

func (r racingVMs) GuaranteedUpdate(ctx context.Context, ns, name string, fn func(*apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)) (*apiv1.VirtualMachine, error) {
	r.race()
	return r.Store.GuaranteedUpdate(ctx, ns, name, fn)
}

// TestForceRestartRollsBackGraceWhenRefusedLate: a request queued between
// the read and the write makes the restart fail after the instance's grace
// period was shortened; it is put back.
func TestForceRestartRollsBackGraceWhenRefusedLate(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyManual)
	createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	ctx := context.Background()
	st := f.st
	st.VMs = racingVMs{Store: f.st.VMs, race: func() {
		if _, err := f.st.VMs.GuaranteedUpdate(ctx, "default", "web", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			vm.Status.StateChangeRequests = []*apiv1.StateChangeRequest{{Action: apiv1.StateChangeStart}}
			return vm, nil
		}); err != nil {
			t.Error(err)
		}
	}}
	svc := newVMService(New(st, Options{}))
	zero := int64(0)
	_, err := svc.Restart(ctx, &apiv1.RestartVirtualMachineRequest{Key: webKey, GracePeriodSeconds: &zero})
	wantRefused(t, err, codes.FailedPrecondition, "unable to complete request: stop/start already underway")
	if g := getVMI(t, f).Spec.GetTerminationGracePeriodSeconds(); g != 30 {
		t.Fatalf("instance grace %d after a failed restart, want 30 restored", g)
	}
}

// TestVerbsKeepConcurrentControllerWrites: the controller writes status
// while the user restarts; both writes survive.
func TestVerbsKeepConcurrentControllerWrites(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyAlways)
	vmi := createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	ctx := context.Background()
	const writes = 30
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range writes {
			if _, err := f.st.VMs.GuaranteedUpdate(ctx, "default", "web", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
				vm.Status.DesiredGeneration++
				return vm, nil
			}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	_, err := f.vms.Restart(ctx, &apiv1.RestartVirtualMachineRequest{Key: webKey})
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	stored := getVM(t, f)
	if stored.Status.DesiredGeneration != writes {
		t.Fatalf("controller writes lost: %d of %d", stored.Status.DesiredGeneration, writes)
	}
	wantRequests(t, stored,
		&apiv1.StateChangeRequest{Action: apiv1.StateChangeStop, Uid: vmi.Metadata.Uid},
		&apiv1.StateChangeRequest{Action: apiv1.StateChangeStart})
}

func TestPauseAndUnpauseSetInstanceSpec(t *testing.T) {
	f := newFixture(t)
	vm := createVM(t, f, apiv1.RunStrategyAlways)
	ctx := context.Background()

	_, err := f.vms.Pause(ctx, &apiv1.PauseVirtualMachineRequest{Key: webKey})
	wantRefused(t, err, codes.FailedPrecondition, "VM is not running")

	vmi := createVMI(t, f, vm.Metadata.Uid, apiv1.PhaseRunning)
	_, err = f.vms.Unpause(ctx, &apiv1.UnpauseVirtualMachineRequest{Key: webKey})
	wantRefused(t, err, codes.FailedPrecondition, "VMI is not paused")

	out, err := f.vms.Pause(ctx, &apiv1.PauseVirtualMachineRequest{Key: webKey})
	if err != nil {
		t.Fatal(err)
	}
	if out.Metadata.Uid != vm.Metadata.Uid {
		t.Fatalf("pause answered with %v", out.Metadata)
	}
	got := getVMI(t, f)
	if !got.Spec.Paused || got.Metadata.Generation != vmi.Metadata.Generation+1 || !proto.Equal(got.Status, vmi.Status) {
		t.Fatalf("instance after pause: %v", got)
	}
	_, err = f.vms.Pause(ctx, &apiv1.PauseVirtualMachineRequest{Key: webKey})
	wantRefused(t, err, codes.FailedPrecondition, "VMI is already paused")

	if _, err := f.vms.Unpause(ctx, &apiv1.UnpauseVirtualMachineRequest{Key: webKey}); err != nil {
		t.Fatal(err)
	}
	if getVMI(t, f).Spec.Paused {
		t.Fatal("unpause left spec.paused set")
	}
	if got := getVM(t, f); !proto.Equal(got, vm) {
		t.Fatalf("pause/unpause wrote the VM: %v", got)
	}
}

// TestVerbsIgnoreAnotherVMsInstance: an instance of the same name owned by
// another VM (a deleted predecessor's, still terminating) is not this VM's.
func TestVerbsIgnoreAnotherVMsInstance(t *testing.T) {
	f := newFixture(t)
	createVM(t, f, apiv1.RunStrategyManual)
	createVMI(t, f, "predecessor-uid", apiv1.PhaseRunning)
	ctx := context.Background()
	_, err := f.vms.Pause(ctx, &apiv1.PauseVirtualMachineRequest{Key: webKey})
	wantRefused(t, err, codes.FailedPrecondition, "VM is not running")
	_, err = f.vms.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: webKey})
	wantRefused(t, err, codes.FailedPrecondition, "VM is not running")
	if _, err := f.vms.Start(ctx, &apiv1.StartVirtualMachineRequest{Key: webKey}); err != nil {
		t.Fatal(err)
	}
	wantRequests(t, getVM(t, f), &apiv1.StateChangeRequest{Action: apiv1.StateChangeStart})
}

func TestVerbsOnMissingVM(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	key := &apiv1.ObjectKey{Name: "ghost"}
	zero := int64(0)
	for name, call := range map[string]func() error{
		"start": func() error { _, err := f.vms.Start(ctx, &apiv1.StartVirtualMachineRequest{Key: key}); return err },
		"stop": func() error {
			_, err := f.vms.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: key, GracePeriodSeconds: &zero})
			return err
		},
		"restart": func() error { _, err := f.vms.Restart(ctx, &apiv1.RestartVirtualMachineRequest{Key: key}); return err },
		"pause":   func() error { _, err := f.vms.Pause(ctx, &apiv1.PauseVirtualMachineRequest{Key: key}); return err },
		"unpause": func() error { _, err := f.vms.Unpause(ctx, &apiv1.UnpauseVirtualMachineRequest{Key: key}); return err },
	} {
		if err := call(); code(err) != codes.NotFound {
			t.Errorf("%s: want NotFound, got %v", name, err)
		}
	}
	if _, err := f.vms.Start(ctx, &apiv1.StartVirtualMachineRequest{}); code(err) != codes.InvalidArgument {
		t.Errorf("start without a name: %v", err)
	}
}
