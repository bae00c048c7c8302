package provider

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// vmWith builds a VM status for judgeVM.
func vmWith(printable string, ready bool, gen int64, conds ...*apiv1.Condition) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "vm-uid", Generation: gen},
		Status: &apiv1.VirtualMachineStatus{
			PrintableStatus: printable, Ready: ready, DesiredGeneration: gen, Conditions: conds,
		},
	}
}

func vmiWith(uid, phase string, ready bool) *apiv1.VirtualMachineInstance {
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: uid,
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "web", Uid: "vm-uid", Controller: true}}},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: phase, NodeName: "n1"},
	}
	if ready {
		vmi.Status.Conditions = []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue}}
	}
	return vmi
}

func TestJudgeVM(t *testing.T) {
	running := vmWith(apiv1.PrintableRunning, true, 2)
	stopped := vmWith(apiv1.PrintableStopped, false, 2)
	type want int
	const (
		wait want = iota
		done
		fail
	)
	for _, c := range []struct {
		name   string
		target waitTarget
		vm     *apiv1.VirtualMachine
		vmi    *apiv1.VirtualMachineInstance
		want   want
		errHas string
	}{
		{"always running", waitTarget{strategy: "Always", generation: 2}, running, vmiWith("a", "Running", true), done, ""},
		{"always not processed yet", waitTarget{strategy: "Always", generation: 1}, vmWith("", false, 1), nil, wait, ""},
		{"always status older than the change", waitTarget{strategy: "Always", generation: 3}, running, vmiWith("a", "Running", true), wait, ""},
		{"always starting", waitTarget{strategy: "Always", generation: 2}, vmWith("Starting", false, 2), vmiWith("a", "Scheduled", false), wait, ""},
		{"always running but not ready", waitTarget{strategy: "Always", generation: 2}, vmWith("Running", false, 2), vmiWith("a", "Running", false), wait, ""},
		{"restart: still the old instance", waitTarget{strategy: "Always", notUID: "a", generation: 2}, running, vmiWith("a", "Running", true), wait, ""},
		{"restart: new instance running", waitTarget{strategy: "Always", notUID: "a", generation: 2}, running, vmiWith("b", "Running", true), done, ""},
		{"always paused by the user", waitTarget{strategy: "Always", generation: 2}, vmWith("Paused", false, 2), vmiWith("a", "Running", false), done, ""},
		{"rerun running", waitTarget{strategy: "RerunOnFailure", generation: 2}, running, vmiWith("a", "Running", true), done, ""},
		{"rerun guest shut down", waitTarget{strategy: "RerunOnFailure", generation: 2}, stopped, vmiWith("a", "Succeeded", false), fail, "RerunOnFailure does not restart"},
		{"halted with instance", waitTarget{strategy: "Halted", generation: 2}, vmWith("Stopping", false, 2), vmiWith("a", "Running", true), wait, ""},
		{"halted stopped", waitTarget{strategy: "Halted", generation: 2}, stopped, nil, done, ""},
		{"once running", waitTarget{strategy: "Once", generation: 2}, running, vmiWith("a", "Running", true), done, ""},
		{"once succeeded", waitTarget{strategy: "Once", generation: 2}, stopped, vmiWith("a", "Succeeded", false), done, ""},
		{"once failed", waitTarget{strategy: "Once", generation: 2}, stopped, vmiWith("a", "Failed", false), fail, "Once does not start it again"},
		{"once pending", waitTarget{strategy: "Once", generation: 2}, vmWith("Starting", false, 2), nil, wait, ""},
		{"manual", waitTarget{strategy: "Manual", generation: 9}, vmWith("", false, 1), nil, done, ""},
		{"unschedulable", waitTarget{strategy: "Always", generation: 2},
			vmWith("ErrorUnschedulable", false, 2, &apiv1.Condition{Type: "PodScheduled", Status: "False", Reason: "Unschedulable",
				Message: "0/2 nodes are available: 2 Insufficient memory."}),
			vmiWith("a", "Pending", false), fail, "no node can run it (ErrorUnschedulable): 0/2 nodes are available: 2 Insufficient memory."},
		{"crash loop", waitTarget{strategy: "Always", generation: 2}, func() *apiv1.VirtualMachine {
			vm := vmWith("CrashLoopBackOff", false, 2)
			vm.Status.StartFailure = &apiv1.VirtualMachineStartFailure{ConsecutiveFailCount: 3,
				RetryAfterTimestamp: timestamppb.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))}
			return vm
		}(), func() *apiv1.VirtualMachineInstance {
			vmi := vmiWith("a", "Failed", false)
			vmi.Status.Reason = "LauncherFailed"
			return vmi
		}(), fail, "failed 3 time(s) in a row before reaching Running (last: LauncherFailed); the agent tries again after 2030-01-02T03:04:05Z"},
		{"persistent volume error", waitTarget{strategy: "Always", generation: 2}, vmWith("DataVolumeError", false, 2),
			func() *apiv1.VirtualMachineInstance {
				vmi := vmiWith("a", "Scheduled", false)
				vmi.Status.Conditions = []*apiv1.Condition{{Type: "Synchronized", Status: "False", Reason: "DataVolumeError",
					Message: `persistent volume "data": image os.img not found.`}}
				return vmi
			}(), fail, `(DataVolumeError): persistent volume "data": image os.img not found. The node keeps retrying`},
		{"failure condition", waitTarget{strategy: "Halted", generation: 2},
			vmWith("Stopped", false, 2, &apiv1.Condition{Type: "Failure", Status: "True", Reason: "FailedDelete", Message: "boom"}),
			nil, fail, "(FailedDelete): boom"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := judgeVM(c.target, c.vm, c.vmi)
			got := wait
			switch {
			case v.err != nil:
				got = fail
			case v.done:
				got = done
			}
			if got != c.want {
				t.Fatalf("verdict %v (err %v, state %s), want %v", got, v.err, v.state, c.want)
			}
			if c.errHas != "" && !strings.Contains(v.err.Error(), c.errHas) {
				t.Errorf("error %q does not say %q", v.err, c.errHas)
			}
		})
	}
}

// fakeVMs serves Get from a scripted sequence of VMs and refuses watches,
// so waitVM must fall back to polling.
type fakeVMs struct {
	apiv1.VirtualMachinesClient
	mu   sync.Mutex
	seq  []*apiv1.VirtualMachine // the last one repeats
	errs []error                 // returned before the sequence, in order
	gets int
}

func (f *fakeVMs) Get(context.Context, *apiv1.GetVirtualMachineRequest, ...grpc.CallOption) (*apiv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	if len(f.errs) > 0 {
		err := f.errs[0]
		f.errs = f.errs[1:]
		return nil, err
	}
	vm := f.seq[0]
	if len(f.seq) > 1 {
		f.seq = f.seq[1:]
	}
	if vm == nil {
		return nil, status.Error(codes.NotFound, "virtualmachine not found")
	}
	return proto.Clone(vm).(*apiv1.VirtualMachine), nil
}

func (f *fakeVMs) Watch(context.Context, *apiv1.WatchVirtualMachinesRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.VirtualMachineEvent], error) {
	return nil, status.Error(codes.Unimplemented, "no watch")
}

type fakeVMIs struct {
	apiv1.VirtualMachineInstancesClient
}

func (fakeVMIs) Get(context.Context, *apiv1.GetVirtualMachineInstanceRequest, ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error) {
	return nil, status.Error(codes.NotFound, "no instance")
}

func (fakeVMIs) Watch(context.Context, *apiv1.WatchVirtualMachineInstancesRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.VirtualMachineInstanceEvent], error) {
	return nil, status.Error(codes.Unimplemented, "no watch")
}

func halted(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
	return judgeVM(waitTarget{strategy: "Halted", generation: 2}, vm, vmi)
}

// fastPoll shortens the poll of waits for the duration of a test.
func fastPoll(t *testing.T) {
	old := pollInterval
	pollInterval = 10 * time.Millisecond
	t.Cleanup(func() { pollInterval = old })
}

// Without watches the wait still ends, by polling; a transient read error
// is retried.
func TestWaitVMPollsAndRetries(t *testing.T) {
	fastPoll(t)
	vms := &fakeVMs{
		errs: []error{status.Error(codes.Unavailable, "connection refused")},
		seq:  []*apiv1.VirtualMachine{vmWith("Stopping", false, 2), vmWith("Stopped", false, 2)},
	}
	c := &client.Client{VMs: vms, VMIs: fakeVMIs{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	vm, _, err := waitVM(ctx, c, "default", "web", halted)
	if err != nil || vm.GetStatus().GetPrintableStatus() != "Stopped" {
		t.Fatalf("waitVM = %v, %v", vm.GetStatus().GetPrintableStatus(), err)
	}
}

// A timeout says what the VM was doing, and the last read error.
func TestWaitVMTimeoutSaysWhy(t *testing.T) {
	fastPoll(t)
	vms := &fakeVMs{seq: []*apiv1.VirtualMachine{vmWith("Stopping", false, 2,
		&apiv1.Condition{Type: "Paused", Status: "True", Reason: "PausedByUser", Message: "paused by the user"})}}
	c := &client.Client{VMs: vms, VMIs: fakeVMIs{}}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err := waitVM(ctx, c, "default", "web", halted)
	if !errors.Is(err, errWaitTimeout) {
		t.Fatalf("err = %v, want a timeout", err)
	}
	for _, want := range []string{"status Stopping", "no instance", "Paused=True (PausedByUser): paused by the user"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("timeout message %q does not say %q", err, want)
		}
	}
}

// A VM deleted during the wait ends it with NotFound; waitGone is done.
func TestWaitVMNotFound(t *testing.T) {
	fastPoll(t)
	vms := &fakeVMs{seq: []*apiv1.VirtualMachine{vmWith("Terminating", false, 2), nil}}
	c := &client.Client{VMs: vms, VMIs: fakeVMIs{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := waitVM(ctx, c, "default", "web", halted); status.Code(err) != codes.NotFound {
		t.Errorf("waitVM err = %v, want NotFound", err)
	}
	vms.seq = []*apiv1.VirtualMachine{vmWith("Terminating", false, 2), nil}
	if err := waitGone(ctx, c, "default", "web"); err != nil {
		t.Errorf("waitGone = %v", err)
	}
}

// An instance owned by an earlier VM of the same name is not this VM's.
// getVM returns the VM's own instance only: not one an earlier VM of the
// same name left, nor a bare VMI of that name.
func TestGetVMKeepsOnlyItsOwnInstance(t *testing.T) {
	earlier := vmiWith("x", "Running", true)
	earlier.Metadata.OwnerReferences[0].Uid = "older-vm"
	bare := vmiWith("y", "Running", true)
	bare.Metadata.OwnerReferences = nil
	for _, c := range []struct {
		name string
		vmi  *apiv1.VirtualMachineInstance
		want string // uid, "" for none
	}{
		{"own", vmiWith("mine", "Running", true), "mine"},
		{"earlier VM's", earlier, ""},
		{"bare", bare, ""},
	} {
		vms := &fakeVMs{seq: []*apiv1.VirtualMachine{vmWith("Running", true, 1)}}
		_, vmi, err := getVM(context.Background(), &client.Client{VMs: vms, VMIs: stubVMI{vmi: c.vmi}}, "default", "web")
		if err != nil || vmi.GetMetadata().GetUid() != c.want {
			t.Errorf("%s instance: getVM = %v, %v; want %q", c.name, vmi.GetMetadata().GetUid(), err, c.want)
		}
	}
}

// stubVMI answers Get with vmi; the embedded (nil) interface stands for
// the calls getVM never makes, so that new RPCs do not break the stub.
type stubVMI struct {
	apiv1.VirtualMachineInstancesClient
	vmi *apiv1.VirtualMachineInstance
}

func (s stubVMI) Get(context.Context, *apiv1.GetVirtualMachineInstanceRequest, ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error) {
	return s.vmi, nil
}

// With the failed instance already gone, the error still says why it
// failed, from what the VM kept.
func TestCrashLoopErrorQuotesKeptCause(t *testing.T) {
	vm := &apiv1.VirtualMachine{Status: &apiv1.VirtualMachineStatus{StartFailure: &apiv1.VirtualMachineStartFailure{
		ConsecutiveFailCount: 2, LastFailureReason: "SyncFailed",
		LastFailureMessage: "unable to stat: /var/lib/virtplane/images/vmlinuz: No such file or directory",
	}}}
	err := crashLoopError(vm, nil)
	if !strings.Contains(err.Error(), "SyncFailed: unable to stat: /var/lib/virtplane/images/vmlinuz") {
		t.Fatalf("error does not quote the cause: %v", err)
	}
}
