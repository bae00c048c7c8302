package nodeagent

import (
	"context"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// The unit tests of this package drive the handler against fakes: the
// VMI service below, the fake launcher and the in-memory state database,
// with no API server or etcd. The harness tests run the same agent
// end to end.

// fakeVMIs is the VMI service in memory, as the handler uses it: status
// writes with compare-and-swap on the resource version, and reads.
type fakeVMIs struct {
	// Nothing but UpdateStatus and Get is called by the handler; the
	// informer, which would List and Watch, does not run in unit tests.
	apiv1.VirtualMachineInstancesClient

	mu   sync.Mutex
	vmis map[string]*apiv1.VirtualMachineInstance // by namespace/name
	rv   int64
	// meddle, when set, is applied to the stored VMI before each of the
	// next `meddles` status writes: another writer got in first.
	meddle  func(v *apiv1.VirtualMachineInstance)
	meddles int
	writes  []*apiv1.VirtualMachineInstanceStatus // accepted status writes
	updates int                                   // UpdateStatus calls
	gets    int                                   // Get calls
	// tl notes accepted status writes ("status:<phase>").
	tl *timeline
}

func newFakeVMIs(tl *timeline) *fakeVMIs {
	return &fakeVMIs{vmis: map[string]*apiv1.VirtualMachineInstance{}, tl: tl}
}

// put stores v as a write would: a new resource version, and a uid for a
// new object.
func (f *fakeVMIs) put(v *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstance {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.putLocked(v)
}

func (f *fakeVMIs) putLocked(v *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstance {
	v = proto.Clone(v).(*apiv1.VirtualMachineInstance)
	f.rv++
	v.Metadata.ResourceVersion = f.rv
	f.vmis[informer.Key(v)] = v
	return proto.Clone(v).(*apiv1.VirtualMachineInstance)
}

func (f *fakeVMIs) get(name string) *apiv1.VirtualMachineInstance {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.vmis[apiv1.Ref("default", name)]; ok {
		return proto.Clone(v).(*apiv1.VirtualMachineInstance)
	}
	return nil
}

func (f *fakeVMIs) UpdateStatus(_ context.Context, in *apiv1.UpdateVirtualMachineInstanceStatusRequest, _ ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updates++
	want := in.GetVmi()
	cur, ok := f.vmis[informer.Key(want)]
	if ok && f.meddles > 0 {
		f.meddles--
		next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
		f.meddle(next)
		cur = f.putLocked(next)
	}
	switch {
	case !ok || cur.GetMetadata().GetUid() != want.GetMetadata().GetUid():
		return nil, status.Error(codes.NotFound, "vmi not found")
	case cur.GetMetadata().GetResourceVersion() != want.GetMetadata().GetResourceVersion():
		return nil, status.Error(codes.Aborted, "resource version conflict")
	}
	next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
	next.Status = proto.Clone(want.GetStatus()).(*apiv1.VirtualMachineInstanceStatus)
	f.writes = append(f.writes, proto.Clone(next.Status).(*apiv1.VirtualMachineInstanceStatus))
	f.tl.add("status:" + next.GetStatus().GetPhase())
	return f.putLocked(next), nil
}

func (f *fakeVMIs) Get(_ context.Context, in *apiv1.GetVirtualMachineInstanceRequest, _ ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gets++
	v, ok := f.vmis[apiv1.Ref(in.GetKey().GetNamespace(), in.GetKey().GetName())]
	if !ok {
		return nil, status.Error(codes.NotFound, "vmi not found")
	}
	return proto.Clone(v).(*apiv1.VirtualMachineInstance), nil
}

// counts returns the UpdateStatus and Get calls so far.
func (f *fakeVMIs) counts() (updates, gets int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.updates, f.gets
}

// unit is an agent on fakes whose reconciles the test drives; its cache
// holds what the test filled in. Its timeline has the fake launcher's
// calls, the state puts and the accepted status writes, in order.
type unit struct {
	t        *testing.T
	a        *Agent
	vmis     *fakeVMIs
	fake     *fake.Manager
	db       *state.MemDB
	clock    *clocktesting.FakeClock
	tl       *timeline
	imageDir string
}

func newUnit(t *testing.T) *unit {
	t.Helper()
	tl := &timeline{}
	u := &unit{t: t, vmis: newFakeVMIs(tl), fake: fake.New(), db: state.NewMemDB(), clock: clocktesting.NewFakeClock(time.Now()),
		tl: tl, imageDir: t.TempDir()}
	tl.follow(u.fake, u.db)
	a, err := New(Options{
		NodeName: testNode,
		// Registration, heartbeats and the VM directory collector do not
		// run in unit tests.
		API:       API{VMIs: u.vmis, Nodes: struct{ NodeReporter }{}, VMs: struct{ VMReader }{}},
		Launchers: u.fake, Tools: fakeTools{u.fake}, Images: fakeImages{},
		State: u.db, NodeDataDir: t.TempDir(), ImageDir: u.imageDir,
		Host:   &HostFacts{Hostname: "host1", CPUs: 4, MemoryBytes: 8 << 30},
		Clock:  u.clock,
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, e := range a.launchers.Drain() {
			e.StopWatching()
		}
	})
	a.lease.set(u.clock.Now().Add(40 * time.Second))
	u.a = a
	return u
}

// create stores a VMI as the VMI controller leaves it after placing it on
// testNode (Scheduled) and shows it to the agent's cache.
func (u *unit) create(name string, opts ...vmiOption) *apiv1.VirtualMachineInstance {
	now := u.clock.Now()
	v := scheduledVMI(name, now, opts...)
	// What the store would add.
	v.Metadata.Uid, v.Metadata.CreationTimestamp = testUID(name), timestamppb.New(now)
	out := u.vmis.put(v)
	u.sync()
	return out
}

// sync shows the agent's cache what the fake service holds, as the
// informer would.
func (u *unit) sync() {
	u.vmis.mu.Lock()
	var all []*apiv1.VirtualMachineInstance
	for _, v := range u.vmis.vmis {
		all = append(all, proto.Clone(v).(*apiv1.VirtualMachineInstance))
	}
	u.vmis.mu.Unlock()
	u.a.vmis.Fill(all...)
}

// reconcile syncs the cache and runs one handler pass.
func (u *unit) reconcile(name string) (time.Duration, error) {
	u.t.Helper()
	u.sync()
	res, err := u.a.Reconcile(context.Background(), "default/"+name)
	return res.RequeueAfter, err
}

func (u *unit) mustReconcile(name string) time.Duration {
	u.t.Helper()
	wait, err := u.reconcile(name)
	if err != nil {
		u.t.Fatalf("reconcile %s: %v", name, err)
	}
	return wait
}
