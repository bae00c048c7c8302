package command

import (
	"context"
	"fmt"
	"maps"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// fakeVMs is an in-memory VirtualMachines service with just enough
// behaviour (resource versions, watch, validation of run_strategy) for the
// commands.
type fakeVMs struct {
	apiv1.UnimplementedVirtualMachinesServer
	fakeFeed[*apiv1.VirtualMachineEvent]

	vms map[string]*apiv1.VirtualMachine
	// conflicts makes the next n updates fail with Aborted.
	conflicts int
	// holdDeletes keeps deleted VMs around (as if finalizers were pending)
	// until finishDelete.
	holdDeletes bool
	writes      int
	lastStop    *apiv1.StopVirtualMachineRequest
	lastStart   *apiv1.StartVirtualMachineRequest
	lastRestart *apiv1.RestartVirtualMachineRequest
}

func newFakeVMs() *fakeVMs {
	return &fakeVMs{vms: map[string]*apiv1.VirtualMachine{}}
}

func vmKey(ns, name string) string { return ns + "/" + name }

// store writes vm with a new resource version and tells the watchers.
// Callers hold mu.
func (f *fakeVMs) store(typ apiv1.EventType, vm *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	f.rv++
	f.writes++
	vm = proto.Clone(vm).(*apiv1.VirtualMachine)
	vm.Metadata.ResourceVersion = f.rv
	if typ == apiv1.EventType_DELETED {
		delete(f.vms, vmKey(vm.Metadata.Namespace, vm.Metadata.Name))
	} else {
		f.vms[vmKey(vm.Metadata.Namespace, vm.Metadata.Name)] = vm
	}
	f.publish(func() *apiv1.VirtualMachineEvent {
		return &apiv1.VirtualMachineEvent{Type: typ, Object: proto.Clone(vm).(*apiv1.VirtualMachine), ResourceVersion: f.rv}
	})
	return proto.Clone(vm).(*apiv1.VirtualMachine)
}

func (f *fakeVMs) notFound(key *apiv1.ObjectKey) error {
	return status.Errorf(codes.NotFound, "virtualmachine %q not found", vmKey(key.GetNamespace(), key.GetName()))
}

func invalid(vm *apiv1.VirtualMachine) error {
	if rs := vm.GetSpec().GetRunStrategy(); rs != "" && rs != "Always" && rs != "Halted" {
		st := status.New(codes.InvalidArgument, fmt.Sprintf("VirtualMachine %q is invalid: ...", vm.GetMetadata().GetName()))
		st, _ = st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "spec.run_strategy", Description: fmt.Sprintf("Unsupported value: %q: supported values: \"Always\", \"Halted\"", rs)},
			{Field: "spec.template.spec.domain.memory.guest", Description: "Invalid value: \"1GB\": must be a quantity such as 512Mi"},
		}})
		return st.Err()
	}
	return nil
}

func (f *fakeVMs) Create(_ context.Context, req *apiv1.CreateVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vm := req.GetVm()
	if err := invalid(vm); err != nil {
		return nil, err
	}
	if _, ok := f.vms[vmKey(vm.Metadata.Namespace, vm.Metadata.Name)]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "virtualmachine %q already exists", vm.Metadata.Name)
	}
	vm = proto.Clone(vm).(*apiv1.VirtualMachine)
	vm.Metadata.CreationTimestamp = timestamppb.New(time.Now().Add(-3 * time.Hour))
	vm.Metadata.Uid = fmt.Sprintf("uid-%d", f.rv+1)
	vm.Status = &apiv1.VirtualMachineStatus{PrintableStatus: "Stopped"}
	return f.store(apiv1.EventType_ADDED, vm), nil
}

func (f *fakeVMs) Get(_ context.Context, req *apiv1.GetVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vm, ok := f.vms[vmKey(req.GetKey().GetNamespace(), req.GetKey().GetName())]
	if !ok {
		return nil, f.notFound(req.GetKey())
	}
	return proto.Clone(vm).(*apiv1.VirtualMachine), nil
}

func (f *fakeVMs) List(_ context.Context, req *apiv1.ListVirtualMachinesRequest) (*apiv1.ListVirtualMachinesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &apiv1.ListVirtualMachinesResponse{ResourceVersion: f.rv}
	for _, k := range sortedKeys(f.vms) {
		if vm := f.vms[k]; req.GetOptions().GetNamespace() == "" || vm.Metadata.Namespace == req.GetOptions().GetNamespace() {
			resp.Items = append(resp.Items, proto.Clone(vm).(*apiv1.VirtualMachine))
		}
	}
	return resp, nil
}

func (f *fakeVMs) Update(_ context.Context, req *apiv1.UpdateVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	in := req.GetVm()
	if err := invalid(in); err != nil {
		return nil, err
	}
	old, ok := f.vms[vmKey(in.Metadata.Namespace, in.Metadata.Name)]
	if !ok {
		return nil, status.Error(codes.NotFound, "not found")
	}
	// Like the real server, which validates the whole metadata.
	if in.Metadata.Uid != old.Metadata.Uid {
		return nil, status.Errorf(codes.InvalidArgument, "metadata.uid: Invalid value: %q: field is immutable", in.Metadata.Uid)
	}
	if f.conflicts > 0 || in.Metadata.ResourceVersion != old.Metadata.ResourceVersion {
		f.conflicts--
		return nil, status.Error(codes.Aborted, "the object has been modified")
	}
	next := proto.Clone(old).(*apiv1.VirtualMachine)
	next.Spec, next.Metadata.Labels, next.Metadata.Annotations = in.Spec, in.Metadata.Labels, in.Metadata.Annotations
	if proto.Equal(next, old) {
		return proto.Clone(old).(*apiv1.VirtualMachine), nil
	}
	return f.store(apiv1.EventType_MODIFIED, next), nil
}

func (f *fakeVMs) Delete(_ context.Context, req *apiv1.DeleteVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vm, ok := f.vms[vmKey(req.GetKey().GetNamespace(), req.GetKey().GetName())]
	if !ok {
		return nil, f.notFound(req.GetKey())
	}
	if f.holdDeletes {
		vm = proto.Clone(vm).(*apiv1.VirtualMachine)
		vm.Metadata.DeletionTimestamp = timestamppb.Now()
		return f.store(apiv1.EventType_MODIFIED, vm), nil
	}
	return f.store(apiv1.EventType_DELETED, vm), nil
}

func (f *fakeVMs) finishDelete(ns, name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.store(apiv1.EventType_DELETED, f.vms[vmKey(ns, name)])
}

func (f *fakeVMs) setStatus(ns, name, printable string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	vm := proto.Clone(f.vms[vmKey(ns, name)]).(*apiv1.VirtualMachine)
	vm.Status.PrintableStatus = printable
	f.store(apiv1.EventType_MODIFIED, vm)
}

func (f *fakeVMs) Watch(req *apiv1.WatchVirtualMachinesRequest, stream apiv1.VirtualMachines_WatchServer) error {
	opts := req.GetOptions()
	match := func(vm *apiv1.VirtualMachine) bool {
		return (opts.GetNamespace() == "" || vm.Metadata.Namespace == opts.GetNamespace()) &&
			(opts.GetName() == "" || vm.Metadata.Name == opts.GetName())
	}
	list := func() []*apiv1.VirtualMachineEvent {
		var initial []*apiv1.VirtualMachineEvent
		for _, k := range sortedKeys(f.vms) {
			if vm := f.vms[k]; match(vm) {
				initial = append(initial, &apiv1.VirtualMachineEvent{Type: apiv1.EventType_ADDED, Object: proto.Clone(vm).(*apiv1.VirtualMachine)})
			}
		}
		return append(initial, &apiv1.VirtualMachineEvent{Type: apiv1.EventType_SYNCED, ResourceVersion: f.rv})
	}
	keep := func(ev *apiv1.VirtualMachineEvent) bool { return match(ev.Object) }
	return f.serveWatch(stream.Context(), list, keep, stream.Send)
}

func (f *fakeVMs) Start(_ context.Context, req *apiv1.StartVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastStart = req
	if req.GetKey().GetName() == "running" {
		return nil, status.Error(codes.FailedPrecondition, "VM is already running")
	}
	return &apiv1.VirtualMachine{}, nil
}

func (f *fakeVMs) Stop(_ context.Context, req *apiv1.StopVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastStop = req
	return &apiv1.VirtualMachine{}, nil
}

func (f *fakeVMs) Restart(_ context.Context, req *apiv1.RestartVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastRestart = req
	return &apiv1.VirtualMachine{}, nil
}

func (f *fakeVMs) Unpause(context.Context, *apiv1.UnpauseVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	return nil, status.Error(codes.Unimplemented, "unpause needs the VM controller")
}

type fakeVMIs struct {
	apiv1.UnimplementedVirtualMachineInstancesServer
}

func (fakeVMIs) List(context.Context, *apiv1.ListVirtualMachineInstancesRequest) (*apiv1.ListVirtualMachineInstancesResponse, error) {
	return &apiv1.ListVirtualMachineInstancesResponse{}, nil
}

type fakeNodes struct {
	apiv1.UnimplementedNodesServer
}

func (fakeNodes) List(_ context.Context, req *apiv1.ListNodesRequest) (*apiv1.ListNodesResponse, error) {
	return &apiv1.ListNodesResponse{Items: []*apiv1.Node{{
		Metadata: &apiv1.ObjectMeta{Name: "node-a", CreationTimestamp: timestamppb.New(time.Now().Add(-3 * time.Hour))},
		Status: &apiv1.NodeStatus{
			Schedulable: true,
			Allocatable: map[string]string{"cpu": "4", "memory": "7Gi"},
			Conditions:  []*apiv1.Condition{{Type: "Ready", Status: "True"}},
			NodeInfo:    &apiv1.NodeInfo{KvmUsable: true, AgentVersion: "dev"},
			Bridges:     []string{"br0", "vpguest0"},
			Networks:    []string{"default"},
		},
	}}}, nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

func (f *fakeVMs) lastRequests() (*apiv1.StartVirtualMachineRequest, *apiv1.StopVirtualMachineRequest, *apiv1.RestartVirtualMachineRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastStart, f.lastStop, f.lastRestart
}

// startFake serves the fakes on a unix socket and returns its endpoint.
func startFake(t *testing.T) (*fakeVMs, string) {
	t.Helper()
	vms := newFakeVMs()
	return vms, serveUnix(t, func(srv *grpc.Server) {
		apiv1.RegisterVirtualMachinesServer(srv, vms)
		apiv1.RegisterVirtualMachineInstancesServer(srv, fakeVMIs{})
		apiv1.RegisterNodesServer(srv, fakeNodes{})
	})
}

// serveUnix serves what register adds on a unix socket until the test
// ends and returns the socket's endpoint: the CLI is tested through the
// transport it uses by default.
func serveUnix(t *testing.T, register func(*grpc.Server)) string {
	t.Helper()
	sock := filepath.Join(testutil.ShortTempDir(t), "agent.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return "unix://" + sock
}

// runCmd runs virtplane-agent args against endpoint.
func runCmd(ctx context.Context, endpoint, stdin string, stdout, stderr *testutil.SyncBuffer, args ...string) error {
	cmd, _ := newRootCommand(func(string) string { return "" })
	cmd.SetArgs(append([]string{"--endpoint", endpoint}, args...))
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return cmd.ExecuteContext(ctx)
}

func run(t *testing.T, endpoint string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	return runIn(t, endpoint, "", args...)
}

func runIn(t *testing.T, endpoint, stdin string, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut testutil.SyncBuffer
	err = runCmd(ctx, endpoint, stdin, &out, &errOut, args...)
	return out.String(), errOut.String(), err
}

func mustRun(t *testing.T, endpoint string, args ...string) string {
	t.Helper()
	out, _, err := run(t, endpoint, args...)
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	return out
}

const example = "../../examples/vm.yaml"
