package nodeagent

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/apiserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/fake"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks/diskstest"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The tests run the real API server over a real (embedded, shared) etcd,
// reached through gRPC in memory; launchers are the fake.
func TestMain(m *testing.M) { storetest.Main(m) }

const testNode = "node1"

// waitTimeout bounds every wait for the agent: generous, for a loaded
// two-core machine under -race; a passing test never waits it out.
const waitTimeout = 30 * time.Second

// stopTimeout bounds an agent's stop, which waits for all it runs (the
// handler, its loops, an image listing under way) to end.
const stopTimeout = 20 * time.Second

// timeline records what happened, across the fake launcher, the state
// database and the API, in order.
type timeline struct {
	mu sync.Mutex
	ev []string
}

func (t *timeline) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.ev = append(t.ev, s)
}

func (t *timeline) events() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.ev...)
}

// follow notes the fake launcher's calls ("launcher:<op>") and the state
// database's puts ("put:handle=<has launcher>").
func (t *timeline) follow(m *fake.Manager, db *state.MemDB) {
	m.OnCall = func(c fake.Call) { t.add("launcher:" + c.Op) }
	db.OnPut = func(r *state.VMI) { t.add(fmt.Sprintf("put:handle=%v", r.HasLauncher())) }
}

// index returns the position of the first event with prefix, or -1.
func (t *timeline) index(prefix string) int {
	for i, e := range t.events() {
		if strings.HasPrefix(e, prefix) {
			return i
		}
	}
	return -1
}

// recordingVMIs notes status writes in the timeline, and fails the test
// on a status the API's validation would refuse.
type recordingVMIs struct {
	apiv1.VirtualMachineInstancesClient
	tl *timeline
	t  testing.TB
}

func (r recordingVMIs) UpdateStatus(ctx context.Context, in *apiv1.UpdateVirtualMachineInstanceStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error) {
	r.tl.add("status:" + in.GetVmi().GetStatus().GetPhase())
	if errs := validation.ValidateVirtualMachineInstanceStatus(in.GetVmi().GetStatus(), field.NewPath("status")); len(errs) > 0 {
		r.t.Errorf("the agent wrote a status the API refuses: %v", errs.ToAggregate())
	}
	return r.VirtualMachineInstancesClient.UpdateStatus(ctx, in, opts...)
}

// recordingNodes notes registrations in the timeline.
type recordingNodes struct {
	apiv1.NodesClient
	tl *timeline
}

func (r recordingNodes) Register(ctx context.Context, in *apiv1.RegisterNodeRequest, opts ...grpc.CallOption) (*apiv1.Node, error) {
	r.tl.add("register")
	return r.NodesClient.Register(ctx, in, opts...)
}

type fakeTools struct{ m *fake.Manager }

func (t fakeTools) Probe(context.Context, string) (launcher.ProbeResult, error) {
	return launcher.ProbeResult{LibvirtVersion: "10.0.0", QEMUVersion: "8.2.0", Hostname: "host1"}, nil
}

func (t fakeTools) ListDomains(context.Context, string) ([]launcher.DomainInfo, error) {
	var out []launcher.DomainInfo
	for _, d := range t.m.Domains() {
		ns, name, _ := strings.Cut(d.VMIKey, "/")
		out = append(out, launcher.DomainInfo{Name: d.Name, UUID: d.UUID, State: d.State, Reason: d.Reason, Node: d.Node,
			VMIUID: d.VMIUID, VMINamespace: ns, VMIName: name})
	}
	return out, nil
}

// ListNetworks: libvirt's test driver has one active network, "default".
func (t fakeTools) ListNetworks(context.Context, string) ([]launcher.NetworkInfo, error) {
	return []launcher.NetworkInfo{{Name: "default", Bridge: "virbr0"}}, nil
}

// fakeImages stands in for qemu-img: bases must exist; overlays are empty
// files. The virtual size of a volume it made or grew is kept apart from
// its bytes (fakeVirtualSizes), as a qcow2's is from what the guest
// writes; any other file's is its length.
type fakeImages struct{}

// fakeVirtualSizes maps a volume's path to its virtual size. Paths are
// under each test's own directories, so tests never share an entry.
var fakeVirtualSizes sync.Map

func (fakeImages) Info(_ context.Context, path string) (disks.ImageInfo, error) {
	st, err := os.Stat(path)
	if err != nil {
		return disks.ImageInfo{}, fmt.Errorf("qemu-img: Could not open '%s': No such file or directory", path)
	}
	if n, ok := fakeVirtualSizes.Load(path); ok {
		return disks.ImageInfo{Format: "qcow2", VirtualSize: n.(int64)}, nil
	}
	return disks.ImageInfo{Format: "raw", VirtualSize: st.Size()}, nil
}

func (fakeImages) CreateBlank(_ context.Context, path string, size int64) error {
	fakeVirtualSizes.Store(strings.TrimSuffix(path, ".tmp"), size)
	return os.WriteFile(path, []byte(fmt.Sprintf("blank %d", size)), 0o600)
}

func (fakeImages) CopyResized(_ context.Context, base, _, dst string, size int64) error {
	fakeVirtualSizes.Store(strings.TrimSuffix(dst, ".tmp"), size)
	return os.WriteFile(dst, []byte(fmt.Sprintf("copy of %s grown to %d", base, size)), 0o600)
}

func (fakeImages) Grow(_ context.Context, path string, size int64) error {
	if _, err := os.Stat(path); err != nil {
		return err
	}
	if n, ok := fakeVirtualSizes.Load(path); ok && n.(int64) > size {
		return fmt.Errorf("qemu-img: Use the --shrink option to perform a shrink operation")
	}
	fakeVirtualSizes.Store(path, size)
	return nil
}

func (fakeImages) CreateOverlay(_ context.Context, base, _ string, overlay string) error {
	return os.WriteFile(overlay, []byte("overlay of "+base), 0o600)
}

type harness struct {
	t        *testing.T
	ctx      context.Context
	stores   apiserver.Stores
	api      *client.Client
	fake     *fake.Manager
	db       *state.MemDB
	clock    *clocktesting.FakeClock
	tl       *timeline
	nodeDir  string
	imageDir string
}

type harnessOptions struct {
	heartbeatInterval time.Duration
	nodeLease         time.Duration
}

func newHarness(t *testing.T, ho ...harnessOptions) *harness {
	t.Helper()
	var hopts harnessOptions
	if len(ho) > 0 {
		hopts = ho[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	etcd := storetest.Client(t)
	stores := apiserver.NewStores(etcd, store.Options{Prefix: storetest.Prefix(t)})
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := apiserver.New(stores, apiserver.Options{
		NodeLease: hopts.nodeLease, HeartbeatInterval: hopts.heartbeatInterval, Logger: quiet,
	})
	c := client.New(testutil.ServeGRPC(t, srv.Register))
	h := &harness{t: t, ctx: ctx, stores: stores, fake: fake.New(), db: state.NewMemDB(), clock: clocktesting.NewFakeClock(time.Now()),
		tl: &timeline{}, nodeDir: t.TempDir(), imageDir: t.TempDir()}
	h.api = &client.Client{VMs: c.VMs, VMIs: recordingVMIs{c.VMIs, h.tl, t}, Nodes: recordingNodes{c.Nodes, h.tl}, Consoles: c.Consoles, Conn: c.Conn}
	h.tl.follow(h.fake, h.db)
	return h
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// options are the agent options of the harness, on the real clock; the
// onFakeClock mod puts an agent on the harness's fake clock.
func (h *harness) options() Options {
	return Options{
		NodeName: testNode, API: API{VMIs: h.api.VMIs, Nodes: h.api.Nodes, VMs: h.api.VMs, Consoles: []console.API{h.api.Consoles}},
		Launchers: h.fake, Tools: fakeTools{h.fake}, Images: fakeImages{},
		State: h.db, NodeDataDir: h.nodeDir, ImageDir: h.imageDir,
		Host: &HostFacts{Hostname: "host1", CPUs: 4, MemoryBytes: 8 << 30, KVMUsable: false, KernelVersion: "6.1.0", Architecture: "amd64"},
		Timing: Timing{
			LivenessInterval: 100 * time.Millisecond,
			// A launcher counts as hung only when a test steps the fake
			// clock past this: no ping is slow enough on a real clock,
			// however loaded the machine (it would mark a healthy
			// launcher dead).
			PingTimeout: time.Hour,
		},
		Logger: testLogger(h.t),
	}
}

// newAgent is an agent with the harness's options, changed by mod.
func (h *harness) newAgent(mod ...func(*Options)) *Agent {
	h.t.Helper()
	o := h.options()
	for _, m := range mod {
		m(&o)
	}
	a, err := New(o)
	if err != nil {
		h.t.Fatal(err)
	}
	return a
}

// directAgent is an agent on the fake clock whose reconciles the test
// drives itself: its informer runs and its lease is valid, nothing else
// does.
func (h *harness) directAgent(mod ...func(*Options)) *Agent {
	h.t.Helper()
	a := h.newAgent(append([]func(*Options){h.onFakeClock}, mod...)...)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	go func() { defer close(done); a.vmis.Run(ctx) }()
	h.t.Cleanup(func() {
		cancel()
		<-done
		for _, e := range a.launchers.Drain() {
			e.StopWatching()
		}
	})
	select {
	case <-a.vmis.Synced():
	case <-h.ctx.Done():
		h.t.Fatal("informer did not sync")
	}
	a.lease.set(h.clock.Now().Add(40 * time.Second))
	return a
}

// onFakeClock runs an agent on the harness's fake clock: its loops
// (liveness, heartbeats, resync, image listing) wait for the test to step
// it.
func (h *harness) onFakeClock(o *Options) { o.Clock = h.clock }

// stepUntil steps the fake clock by step until cond holds: for what an
// agent does on that clock (a loop's period, a timer) however many steps
// it takes, since a step before the agent waits moves nothing.
func (h *harness) stepUntil(step time.Duration, what string, cond func() bool) {
	h.t.Helper()
	testutil.Eventually(h.t, waitTimeout, what, func() bool {
		if cond() {
			return true
		}
		h.clock.Step(step)
		return false
	})
}

// runAgent runs a full agent (on the real clock unless a mod says
// otherwise, such as onFakeClock) until the returned stop is called or
// the test ends.
func (h *harness) runAgent(mod ...func(*Options)) (a *Agent, stop func()) {
	h.t.Helper()
	a = h.newAgent(mod...)
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					h.t.Errorf("agent Run: %v", err)
				}
			case <-time.After(stopTimeout):
				h.t.Error("agent did not stop")
			}
		})
	}
	h.t.Cleanup(stop)
	return a, stop
}

type vmiOption func(*apiv1.VirtualMachineInstance)

func withGrace(s int64) vmiOption {
	return func(v *apiv1.VirtualMachineInstance) { v.Spec.TerminationGracePeriodSeconds = &s }
}

func withPolicy(p string) vmiOption {
	return func(v *apiv1.VirtualMachineInstance) { v.Metadata.Annotations[apiv1.AnnotationNodeFailurePolicy] = p }
}

func withKernel(kernel string) vmiOption {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Spec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: kernel, Cmdline: "console=ttyS0"}}
	}
}

func withImageDisk(volume, image string) vmiOption {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Spec.Domain.Devices.Disks = append(v.Spec.Domain.Devices.Disks, &apiv1.Disk{Name: volume, Disk: &apiv1.DiskTarget{Bus: "virtio"}})
		v.Spec.Volumes = append(v.Spec.Volumes, &apiv1.Volume{Name: volume, Image: &apiv1.ImageVolume{Name: image}})
	}
}

func withoutFinalizer() vmiOption {
	return func(v *apiv1.VirtualMachineInstance) { v.Metadata.Finalizers = nil }
}

// createVMI stores a VMI as the VMI controller leaves it after placing it
// on testNode: Scheduled, labelled, with the VM controller's finalizer.
func (h *harness) createVMI(name string, opts ...vmiOption) *apiv1.VirtualMachineInstance {
	h.t.Helper()
	withFinalizer := func(v *apiv1.VirtualMachineInstance) { v.Metadata.Finalizers = []string{apiv1.FinalizerVMController} }
	v := scheduledVMI(name, time.Now(), append([]vmiOption{withFinalizer}, opts...)...)
	out, err := h.stores.VMIs.Create(h.ctx, v)
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// startVMI creates VMI name and runs a's first pass over it, which starts
// its guest.
func (h *harness) startVMI(a *Agent, name string, opts ...vmiOption) *apiv1.VirtualMachineInstance {
	h.t.Helper()
	v := h.createVMI(name, opts...)
	h.reconcile(a, name)
	return v
}

// newStarted is a harness whose direct agent has started VMI name: where
// most tests of the handler begin.
func newStarted(t *testing.T, name string, opts ...vmiOption) (*harness, *Agent) {
	t.Helper()
	h := newHarness(t)
	a := h.directAgent()
	h.startVMI(a, name, opts...)
	return h, a
}

// scheduledVMI is a VMI placed on testNode at now, with opts applied.
func scheduledVMI(name string, now time.Time, opts ...vmiOption) *apiv1.VirtualMachineInstance {
	grace := int64(30)
	v := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name,
			Labels:      map[string]string{apiv1.LabelNodeName: testNode},
			Annotations: map[string]string{}},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain:                        &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}, Devices: &apiv1.Devices{}},
			TerminationGracePeriodSeconds: &grace,
		},
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseScheduled, NodeName: testNode,
			PhaseTransitionTimestamps: []*apiv1.PhaseTransitionTimestamp{{Phase: apiv1.PhaseScheduled, Time: timestamppb.New(now)}}},
	}
	for _, o := range opts {
		o(v)
	}
	return v
}

func (h *harness) getVMI(name string) *apiv1.VirtualMachineInstance {
	h.t.Helper()
	v, err := h.stores.VMIs.Get(h.ctx, "default", name)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

func (h *harness) updateVMI(name string, fn func(v *apiv1.VirtualMachineInstance)) *apiv1.VirtualMachineInstance {
	h.t.Helper()
	out, err := h.stores.VMIs.GuaranteedUpdate(h.ctx, "default", name, func(v *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
		v = proto.Clone(v).(*apiv1.VirtualMachineInstance)
		fn(v)
		return v, nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return out
}

// deleteVMI deletes the VMI: with its finalizer it only gets a deletion
// timestamp, as when its VM stops it.
func (h *harness) deleteVMI(name string) {
	h.t.Helper()
	if _, _, err := h.stores.VMIs.Delete(h.ctx, "default", name, store.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// synced waits until a's cache shows the stored state of name (or its
// absence).
func (h *harness) synced(a *Agent, name string) {
	h.t.Helper()
	want, err := h.stores.VMIs.Get(h.ctx, "default", name)
	gone := err != nil
	testutil.Eventually(h.t, waitTimeout, "cache shows "+name, func() bool {
		got, ok := a.vmis.Get("default", name)
		if gone {
			return !ok
		}
		return ok && got.Metadata.ResourceVersion == want.Metadata.ResourceVersion
	})
}

// reconcile syncs the cache, then runs one handler pass.
func (h *harness) reconcile(a *Agent, name string) time.Duration {
	h.t.Helper()
	h.synced(a, name)
	res, err := a.Reconcile(h.ctx, "default/"+name)
	if err != nil {
		h.t.Fatalf("reconcile %s: %v", name, err)
	}
	return res.RequeueAfter
}

func (h *harness) phase(name string) string {
	return h.getVMI(name).GetStatus().GetPhase()
}

func (h *harness) waitPhase(name, phase string) *apiv1.VirtualMachineInstance {
	h.t.Helper()
	testutil.Eventually(h.t, waitTimeout, name+" "+phase, func() bool { return h.phase(name) == phase })
	return h.getVMI(name)
}

// deleteIgnoringACPI makes VMI name's guest ignore ACPI, deletes the VMI
// and runs a's pass that presses the power button: a graceful shutdown
// that only a kill can end has begun.
func (h *harness) deleteIgnoringACPI(a *Agent, name string) {
	h.t.Helper()
	h.fake.SetPowerOffAfterACPI(domainOf(name), 0)
	h.deleteVMI(name)
	h.reconcile(a, name)
}

// wantPhase fails the test now unless VMI name is in phase for reason,
// and returns it.
func (h *harness) wantPhase(name, phase, reason string) *apiv1.VirtualMachineInstance {
	h.t.Helper()
	v := h.getVMI(name)
	if v.Status.Phase != phase || v.Status.Reason != reason {
		h.t.Fatalf("VMI %s: phase %s/%s, want %s/%s", name, v.Status.Phase, v.Status.Reason, phase, reason)
	}
	return v
}

// wantNoDomain reports an error if VMI name's domain is still defined.
func (h *harness) wantNoDomain(name string) {
	h.t.Helper()
	if d, ok := h.fake.Domain(domainOf(name)); ok {
		h.t.Errorf("domain of VMI %s still defined: %+v", name, d)
	}
}

// wantGuestUntouched reports an error unless VMI name's guest still runs,
// started once, and the VMI is Running: what replacing or reattaching a
// launcher must leave as it was.
func (h *harness) wantGuestUntouched(name string) {
	h.t.Helper()
	if d, _ := h.fake.Domain(domainOf(name)); d.Starts != 1 || d.State != fake.StateRunning {
		h.t.Errorf("guest restarted or stopped: %+v", d)
	}
	if p := h.phase(name); p != apiv1.PhaseRunning {
		h.t.Errorf("phase %s", p)
	}
}

func (h *harness) record(name string) *state.VMI {
	h.t.Helper()
	recs, err := h.db.ListVMIs()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, r := range recs {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// layout is the node data directory the harness's agents use.
func (h *harness) layout() nodedir.Layout { return nodedir.Layout{Root: h.nodeDir} }

// mustPath is the path a layout call returned; its error fails the test.
func (h *harness) mustPath(path string, err error) string {
	h.t.Helper()
	if err != nil {
		h.t.Fatal(err)
	}
	return path
}

func domainOf(name string) string { return apiv1.DomainName("default", name) }

// writeFile puts a one-byte file at path: an image or a device node that
// only has to exist.
func writeFile(t *testing.T, path string) {
	t.Helper()
	diskstest.WriteFile(t, path, []byte("x"))
}
