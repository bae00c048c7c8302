package command

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// fakeRecord is one write of a fake object: what a watch sends.
type fakeRecord[T object] struct {
	typ apiv1.EventType
	obj T
	rv  int64
}

// fakeObjects is an in-memory store of one snapshot kind, shared by the
// four fake services: objects keep a history of their events, so that a
// watch from a resource version replays what it missed, and the test can
// break the open watches, as fakeMigrations does.
type fakeObjects[T object] struct {
	fakeFeed[fakeRecord[T]]

	kind    string
	objs    map[string]T
	history []fakeRecord[T]
	// defaults fills in what the server defaults on create.
	defaults func(T)
	// created are the objects as the create requests had them.
	created []T
	deleted []string
	// holdDeletes keeps deleted objects, with a deletion timestamp, until
	// finishDelete (a finalizer pending).
	holdDeletes bool
	cancels     map[int]context.CancelFunc
	opened      int
}

func newFakeObjects[T object](kind string, defaults func(T)) *fakeObjects[T] {
	return &fakeObjects[T]{kind: kind, objs: map[string]T{}, defaults: defaults, cancels: map[int]context.CancelFunc{}}
}

func cloneOf[T proto.Message](m T) T { return proto.Clone(m).(T) }

// store writes obj with a new resource version, records the event and
// tells the watchers. Callers hold mu.
func (f *fakeObjects[T]) store(typ apiv1.EventType, obj T) T {
	f.rv++
	obj = cloneOf(obj)
	md := obj.GetMetadata()
	md.ResourceVersion = f.rv
	key := vmKey(md.Namespace, md.Name)
	if typ == apiv1.EventType_DELETED {
		delete(f.objs, key)
	} else {
		f.objs[key] = obj
	}
	rec := fakeRecord[T]{typ: typ, obj: obj, rv: f.rv}
	f.history = append(f.history, rec)
	f.publish(func() fakeRecord[T] { return fakeRecord[T]{typ: typ, obj: cloneOf(obj), rv: rec.rv} })
	return cloneOf(obj)
}

func (f *fakeObjects[T]) notFound(key *apiv1.ObjectKey) error {
	return status.Errorf(codes.NotFound, "%s %q not found", f.kind, vmKey(key.GetNamespace(), key.GetName()))
}

func (f *fakeObjects[T]) create(obj T) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	md := obj.GetMetadata()
	if md.GetName() == "" {
		return zero, status.Errorf(codes.InvalidArgument, "metadata.name: Required value")
	}
	if _, ok := f.objs[vmKey(md.Namespace, md.Name)]; ok {
		return zero, status.Errorf(codes.AlreadyExists, "%s %q already exists", f.kind, md.Name)
	}
	f.created = append(f.created, cloneOf(obj))
	obj = cloneOf(obj)
	md = obj.GetMetadata()
	md.Uid = fmt.Sprintf("%s-uid-%d", strings.ToLower(f.kind), len(f.created))
	md.CreationTimestamp = timestamppb.New(time.Now().Add(-90 * time.Second))
	md.Finalizers = []string{"test"}
	if f.defaults != nil {
		f.defaults(obj)
	}
	return f.store(apiv1.EventType_ADDED, obj), nil
}

func (f *fakeObjects[T]) get(key *apiv1.ObjectKey) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if o, ok := f.objs[vmKey(key.GetNamespace(), key.GetName())]; ok {
		return cloneOf(o), nil
	}
	var zero T
	return zero, f.notFound(key)
}

// lastCreated is the last create request's object.
func (f *fakeObjects[T]) lastCreated() T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	if len(f.created) == 0 {
		return zero
	}
	return cloneOf(f.created[len(f.created)-1])
}

func (f *fakeObjects[T]) list(opts *apiv1.ListOptions) ([]T, int64, error) {
	sel, err := labels.Parse(opts.GetLabelSelector())
	if err != nil {
		return nil, 0, status.Errorf(codes.InvalidArgument, "label_selector: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var items []T
	for _, k := range sortedKeys(f.objs) {
		o := f.objs[k]
		if ns := opts.GetNamespace(); (ns == "" || o.GetMetadata().Namespace == ns) && sel.Matches(labels.Set(o.GetMetadata().Labels)) {
			items = append(items, cloneOf(o))
		}
	}
	return items, f.rv, nil
}

func (f *fakeObjects[T]) del(key *apiv1.ObjectKey) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objs[vmKey(key.GetNamespace(), key.GetName())]
	if !ok {
		var zero T
		return zero, f.notFound(key)
	}
	f.deleted = append(f.deleted, key.GetName())
	if !f.holdDeletes {
		return f.store(apiv1.EventType_DELETED, o), nil
	}
	o = cloneOf(o)
	o.GetMetadata().DeletionTimestamp = timestamppb.Now()
	return f.store(apiv1.EventType_MODIFIED, o), nil
}

func (f *fakeObjects[T]) finishDelete(ns, name string) {
	f.locked(func() { f.store(apiv1.EventType_DELETED, f.objs[vmKey(ns, name)]) })
}

// update changes an object as its controller would.
func (f *fakeObjects[T]) update(ns, name string, change func(T)) {
	f.locked(func() {
		o := cloneOf(f.objs[vmKey(ns, name)])
		change(o)
		f.store(apiv1.EventType_MODIFIED, o)
	})
}

// put stores obj as it is (one made by a controller).
func (f *fakeObjects[T]) put(obj T) {
	f.locked(func() { f.store(apiv1.EventType_ADDED, obj) })
}

func (f *fakeObjects[T]) deletedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deleted...)
}

func (f *fakeObjects[T]) watchesOpened() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened
}

// breakWatches ends every open watch with Unavailable, as an agent that
// restarts does.
func (f *fakeObjects[T]) breakWatches() {
	f.locked(func() {
		for _, cancel := range f.cancels {
			cancel()
		}
	})
}

// watch lists the matching objects (resource version 0) or replays the
// events after the version asked for, then follows.
func (f *fakeObjects[T]) watch(stream context.Context, opts *apiv1.WatchOptions, send func(fakeRecord[T]) error) error {
	sel, err := labels.Parse(opts.GetLabelSelector())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "label_selector: %v", err)
	}
	match := func(o T) bool {
		md := o.GetMetadata()
		return (opts.GetNamespace() == "" || md.Namespace == opts.GetNamespace()) &&
			(opts.GetName() == "" || md.Name == opts.GetName()) && sel.Matches(labels.Set(md.Labels))
	}
	list := func() []fakeRecord[T] {
		var initial []fakeRecord[T]
		if rv := opts.GetResourceVersion(); rv > 0 {
			for _, rec := range f.history {
				if rec.rv > rv && match(rec.obj) {
					initial = append(initial, fakeRecord[T]{typ: rec.typ, obj: cloneOf(rec.obj), rv: rec.rv})
				}
			}
			return initial
		}
		for _, k := range sortedKeys(f.objs) {
			if o := f.objs[k]; match(o) {
				initial = append(initial, fakeRecord[T]{typ: apiv1.EventType_ADDED, obj: cloneOf(o)})
			}
		}
		var zero T
		return append(initial, fakeRecord[T]{typ: apiv1.EventType_SYNCED, obj: zero, rv: f.rv})
	}
	ctx, cancel := context.WithCancel(stream)
	defer cancel()
	f.locked(func() {
		f.opened++
		id := f.opened
		f.cancels[id] = cancel
		context.AfterFunc(ctx, func() { f.locked(func() { delete(f.cancels, id) }) })
	})
	keep := func(rec fakeRecord[T]) bool { return match(rec.obj) }
	if err := f.serveWatch(ctx, list, keep, send); err != nil {
		return err
	}
	if stream.Err() == nil {
		return status.Error(codes.Unavailable, "the agent is shutting down")
	}
	return nil
}

type fakeSnapshots struct {
	apiv1.UnimplementedSnapshotsServer
	*fakeObjects[*apiv1.VirtualMachineSnapshot]
}

func (f fakeSnapshots) Create(_ context.Context, r *apiv1.CreateSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	return f.create(r.GetSnapshot())
}
func (f fakeSnapshots) Get(_ context.Context, r *apiv1.GetSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	return f.get(r.GetKey())
}
func (f fakeSnapshots) List(_ context.Context, r *apiv1.ListSnapshotsRequest) (*apiv1.ListSnapshotsResponse, error) {
	items, rv, err := f.list(r.GetOptions())
	return &apiv1.ListSnapshotsResponse{Items: items, ResourceVersion: rv}, err
}
func (f fakeSnapshots) Delete(_ context.Context, r *apiv1.DeleteSnapshotRequest) (*apiv1.VirtualMachineSnapshot, error) {
	return f.del(r.GetKey())
}
func (f fakeSnapshots) Watch(r *apiv1.WatchSnapshotsRequest, s grpc.ServerStreamingServer[apiv1.SnapshotEvent]) error {
	return f.watch(s.Context(), r.GetOptions(), func(rec fakeRecord[*apiv1.VirtualMachineSnapshot]) error {
		return s.Send(&apiv1.SnapshotEvent{Type: rec.typ, Object: rec.obj, ResourceVersion: rec.rv})
	})
}

type fakeSnapshotContents struct {
	apiv1.UnimplementedSnapshotContentsServer
	*fakeObjects[*apiv1.VirtualMachineSnapshotContent]
}

func (f fakeSnapshotContents) Get(_ context.Context, r *apiv1.GetSnapshotContentRequest) (*apiv1.VirtualMachineSnapshotContent, error) {
	return f.get(r.GetKey())
}
func (f fakeSnapshotContents) List(_ context.Context, r *apiv1.ListSnapshotContentsRequest) (*apiv1.ListSnapshotContentsResponse, error) {
	items, rv, err := f.list(r.GetOptions())
	return &apiv1.ListSnapshotContentsResponse{Items: items, ResourceVersion: rv}, err
}
func (f fakeSnapshotContents) Delete(_ context.Context, r *apiv1.DeleteSnapshotContentRequest) (*apiv1.VirtualMachineSnapshotContent, error) {
	return f.del(r.GetKey())
}
func (f fakeSnapshotContents) Watch(r *apiv1.WatchSnapshotContentsRequest, s grpc.ServerStreamingServer[apiv1.SnapshotContentEvent]) error {
	return f.watch(s.Context(), r.GetOptions(), func(rec fakeRecord[*apiv1.VirtualMachineSnapshotContent]) error {
		return s.Send(&apiv1.SnapshotContentEvent{Type: rec.typ, Object: rec.obj, ResourceVersion: rec.rv})
	})
}

type fakeRestores struct {
	apiv1.UnimplementedRestoresServer
	*fakeObjects[*apiv1.VirtualMachineRestore]
}

func (f fakeRestores) Create(_ context.Context, r *apiv1.CreateRestoreRequest) (*apiv1.VirtualMachineRestore, error) {
	return f.create(r.GetRestore())
}
func (f fakeRestores) Get(_ context.Context, r *apiv1.GetRestoreRequest) (*apiv1.VirtualMachineRestore, error) {
	return f.get(r.GetKey())
}
func (f fakeRestores) List(_ context.Context, r *apiv1.ListRestoresRequest) (*apiv1.ListRestoresResponse, error) {
	items, rv, err := f.list(r.GetOptions())
	return &apiv1.ListRestoresResponse{Items: items, ResourceVersion: rv}, err
}
func (f fakeRestores) Delete(_ context.Context, r *apiv1.DeleteRestoreRequest) (*apiv1.VirtualMachineRestore, error) {
	return f.del(r.GetKey())
}
func (f fakeRestores) Watch(r *apiv1.WatchRestoresRequest, s grpc.ServerStreamingServer[apiv1.RestoreEvent]) error {
	return f.watch(s.Context(), r.GetOptions(), func(rec fakeRecord[*apiv1.VirtualMachineRestore]) error {
		return s.Send(&apiv1.RestoreEvent{Type: rec.typ, Object: rec.obj, ResourceVersion: rec.rv})
	})
}

type fakeClones struct {
	apiv1.UnimplementedClonesServer
	*fakeObjects[*apiv1.VirtualMachineClone]
}

func (f fakeClones) Create(_ context.Context, r *apiv1.CreateCloneRequest) (*apiv1.VirtualMachineClone, error) {
	return f.create(r.GetClone())
}
func (f fakeClones) Get(_ context.Context, r *apiv1.GetCloneRequest) (*apiv1.VirtualMachineClone, error) {
	return f.get(r.GetKey())
}
func (f fakeClones) List(_ context.Context, r *apiv1.ListClonesRequest) (*apiv1.ListClonesResponse, error) {
	items, rv, err := f.list(r.GetOptions())
	return &apiv1.ListClonesResponse{Items: items, ResourceVersion: rv}, err
}
func (f fakeClones) Delete(_ context.Context, r *apiv1.DeleteCloneRequest) (*apiv1.VirtualMachineClone, error) {
	return f.del(r.GetKey())
}
func (f fakeClones) Watch(r *apiv1.WatchClonesRequest, s grpc.ServerStreamingServer[apiv1.CloneEvent]) error {
	return f.watch(s.Context(), r.GetOptions(), func(rec fakeRecord[*apiv1.VirtualMachineClone]) error {
		return s.Send(&apiv1.CloneEvent{Type: rec.typ, Object: rec.obj, ResourceVersion: rec.rv})
	})
}

// deleteRecordingVMs is the fake VMs service remembering the last
// delete request (delete_snapshots).
type deleteRecordingVMs struct {
	*fakeVMs
	last *apiv1.DeleteVirtualMachineRequest
}

func (v *deleteRecordingVMs) Delete(ctx context.Context, req *apiv1.DeleteVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	v.locked(func() { v.last = proto.Clone(req).(*apiv1.DeleteVirtualMachineRequest) })
	return v.fakeVMs.Delete(ctx, req)
}

func (v *deleteRecordingVMs) lastDelete() *apiv1.DeleteVirtualMachineRequest {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.last
}

// snapFake is what startSnapshotFake serves.
type snapFake struct {
	snaps    *fakeObjects[*apiv1.VirtualMachineSnapshot]
	contents *fakeObjects[*apiv1.VirtualMachineSnapshotContent]
	restores *fakeObjects[*apiv1.VirtualMachineRestore]
	clones   *fakeObjects[*apiv1.VirtualMachineClone]
	vms      *deleteRecordingVMs
	ep       string
}

// startSnapshotFake serves the fake VMs, VMIs, nodes and the four
// snapshot services; their creates fill in the server's defaults
// (validation.DefaultSnapshot and friends).
func startSnapshotFake(t *testing.T) *snapFake {
	t.Helper()
	f := &snapFake{
		snaps: newFakeObjects(apiv1.KindSnapshot, func(s *apiv1.VirtualMachineSnapshot) {
			if s.Spec.DeletionPolicy == "" {
				s.Spec.DeletionPolicy = apiv1.DeletionPolicyDelete
			}
		}),
		contents: newFakeObjects[*apiv1.VirtualMachineSnapshotContent](apiv1.KindSnapshotContent, nil),
		restores: newFakeObjects(apiv1.KindRestore, func(r *apiv1.VirtualMachineRestore) {
			if r.Spec.TargetReadinessPolicy == "" {
				r.Spec.TargetReadinessPolicy = apiv1.ReadinessWaitGracePeriod
			}
		}),
		clones: newFakeObjects(apiv1.KindClone, func(c *apiv1.VirtualMachineClone) {
			if c.Spec.SourceKind == "" {
				c.Spec.SourceKind = apiv1.CloneSourceVM
			}
		}),
		vms: &deleteRecordingVMs{fakeVMs: newFakeVMs()},
	}
	f.ep = serveUnix(t, func(srv *grpc.Server) {
		apiv1.RegisterVirtualMachinesServer(srv, f.vms)
		apiv1.RegisterVirtualMachineInstancesServer(srv, fakeVMIs{})
		apiv1.RegisterNodesServer(srv, fakeNodes{})
		apiv1.RegisterSnapshotsServer(srv, fakeSnapshots{fakeObjects: f.snaps})
		apiv1.RegisterSnapshotContentsServer(srv, fakeSnapshotContents{fakeObjects: f.contents})
		apiv1.RegisterRestoresServer(srv, fakeRestores{fakeObjects: f.restores})
		apiv1.RegisterClonesServer(srv, fakeClones{fakeObjects: f.clones})
	})
	return f
}

// runCmdClock is runCmd with the snapshot, restore and clone commands
// built on clk (their default names are stamped with its time).
func runCmdClock(ctx context.Context, endpoint string, clk clock.Clock, stdout, stderr *testutil.SyncBuffer, args ...string) error {
	cmd, o := newRootCommand(func(string) string { return "" })
	for _, c := range cmd.Commands() {
		switch c.Name() {
		case "snapshot", "restore", "clone":
			cmd.RemoveCommand(c)
		}
	}
	cmd.AddCommand(newSnapshotCommand(o, clk), newRestoreCommand(o, clk), newCloneCommand(o, clk))
	cmd.SetArgs(append([]string{"--endpoint", endpoint}, args...))
	cmd.SetIn(strings.NewReader(""))
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	return cmd.ExecuteContext(ctx)
}

// runClock runs args to the end on clk.
func runClock(t *testing.T, endpoint string, clk clock.Clock, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out, errOut testutil.SyncBuffer
	err = runCmdClock(ctx, endpoint, clk, &out, &errOut, args...)
	return out.String(), errOut.String(), err
}

// startWait runs args (a command with --wait) in the background until
// it watches what it made (watchers says how many watches are open).
func startWait(t *testing.T, ep string, watchers func() int, args ...string) (stdout, stderr *testutil.SyncBuffer, done <-chan error) {
	t.Helper()
	stdout, stderr = &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	ch := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	go func() { ch <- runCmd(ctx, ep, "", stdout, stderr, args...) }()
	testutil.Eventually(t, 10*time.Second, "the command to watch what it made", func() bool { return watchers() > 0 })
	return stdout, stderr, ch
}

func waitCommand(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("the command did not return")
		return nil
	}
}
