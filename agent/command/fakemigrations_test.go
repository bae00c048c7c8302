package command

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// fakeMigrations is an in-memory Migrations service: migrations keep a
// history of their events, so that a watch from a resource version
// replays what it missed, and the test can break the open watches.
type fakeMigrations struct {
	apiv1.UnimplementedMigrationsServer
	fakeFeed[*apiv1.MigrationEvent]

	migs    map[string]*apiv1.VirtualMachineInstanceMigration
	history []*apiv1.MigrationEvent
	// running are the VMs (ns/name) VMs.Migrate accepts.
	running map[string]bool
	// lastMigrate is the last VMs.Migrate request.
	lastMigrate *apiv1.MigrateVirtualMachineRequest
	// cancels end the open watches (breakWatches); opened counts them.
	cancels map[int]context.CancelFunc
	opened  int
	deleted []string
}

func newFakeMigrations() *fakeMigrations {
	return &fakeMigrations{
		migs: map[string]*apiv1.VirtualMachineInstanceMigration{}, running: map[string]bool{},
		cancels: map[int]context.CancelFunc{},
	}
}

// migratingVMs is the fake VMs service with VMs.Migrate, which creates
// the migration in migs as the API server does.
type migratingVMs struct {
	*fakeVMs
	migs *fakeMigrations
}

func (v migratingVMs) Migrate(_ context.Context, req *apiv1.MigrateVirtualMachineRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	f := v.migs
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastMigrate = req
	ns, name := req.GetKey().GetNamespace(), req.GetKey().GetName()
	if !f.running[vmKey(ns, name)] {
		return nil, status.Errorf(codes.FailedPrecondition, "VM %s is not running", vmKey(ns, name))
	}
	for _, m := range f.migs {
		if m.GetSpec().GetVmiName() == name && !apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
			return nil, status.Errorf(codes.FailedPrecondition, "migration %s is already in progress for instance %s", m.Metadata.Name, name)
		}
	}
	m := &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{
			Namespace: ns, Name: fmt.Sprintf("%s-migration-%05d", name, len(f.migs)+1), Uid: fmt.Sprintf("mig-uid-%d", len(f.migs)+1),
			Labels:            map[string]string{apiv1.LabelMigrationVMIName: name},
			Finalizers:        []string{apiv1.FinalizerMigration},
			CreationTimestamp: timestamppb.New(time.Now().Add(-90 * time.Second)),
		},
		Spec:   &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: name, AddedNodeSelector: req.GetAddedNodeSelector()},
		Status: &apiv1.VirtualMachineInstanceMigrationStatus{},
	}
	return f.store(apiv1.EventType_ADDED, m), nil
}

// store writes m with a new resource version, records the event and
// tells the watchers. Callers hold mu.
func (f *fakeMigrations) store(typ apiv1.EventType, m *apiv1.VirtualMachineInstanceMigration) *apiv1.VirtualMachineInstanceMigration {
	f.rv++
	m = proto.Clone(m).(*apiv1.VirtualMachineInstanceMigration)
	m.Metadata.ResourceVersion = f.rv
	key := vmKey(m.Metadata.Namespace, m.Metadata.Name)
	if typ == apiv1.EventType_DELETED {
		delete(f.migs, key)
	} else {
		f.migs[key] = m
	}
	ev := &apiv1.MigrationEvent{Type: typ, Object: m, ResourceVersion: f.rv}
	f.history = append(f.history, ev)
	f.publish(func() *apiv1.MigrationEvent { return proto.Clone(ev).(*apiv1.MigrationEvent) })
	return proto.Clone(m).(*apiv1.VirtualMachineInstanceMigration)
}

// put stores m as it is (a migration made by the test).
func (f *fakeMigrations) put(m *apiv1.VirtualMachineInstanceMigration) {
	f.locked(func() { f.store(apiv1.EventType_ADDED, m) })
}

// update changes a migration's status as the controller would.
func (f *fakeMigrations) update(ns, name string, change func(*apiv1.VirtualMachineInstanceMigrationStatus)) {
	f.locked(func() {
		m := proto.Clone(f.migs[vmKey(ns, name)]).(*apiv1.VirtualMachineInstanceMigration)
		change(m.Status)
		typ := apiv1.EventType_MODIFIED
		// The finalizer is released once a canceled migration ended.
		if m.Metadata.DeletionTimestamp != nil && apiv1.IsMigrationFinal(m.Status.Phase) {
			typ = apiv1.EventType_DELETED
		}
		f.store(typ, m)
	})
}

func (f *fakeMigrations) get(ns, name string) *apiv1.VirtualMachineInstanceMigration {
	f.mu.Lock()
	defer f.mu.Unlock()
	if m, ok := f.migs[vmKey(ns, name)]; ok {
		return proto.Clone(m).(*apiv1.VirtualMachineInstanceMigration)
	}
	return nil
}

func (f *fakeMigrations) watchesOpened() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.opened
}

// breakWatches ends every open watch with Unavailable, as an agent that
// restarts does.
func (f *fakeMigrations) breakWatches() {
	f.locked(func() {
		for _, cancel := range f.cancels {
			cancel()
		}
	})
}

func (f *fakeMigrations) Get(_ context.Context, req *apiv1.GetMigrationRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	if m := f.get(req.GetKey().GetNamespace(), req.GetKey().GetName()); m != nil {
		return m, nil
	}
	return nil, status.Errorf(codes.NotFound, "migration %q not found", req.GetKey().GetName())
}

func (f *fakeMigrations) List(_ context.Context, req *apiv1.ListMigrationsRequest) (*apiv1.ListMigrationsResponse, error) {
	sel, err := labels.Parse(req.GetOptions().GetLabelSelector())
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "label_selector: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &apiv1.ListMigrationsResponse{ResourceVersion: f.rv}
	for _, k := range sortedKeys(f.migs) {
		m := f.migs[k]
		if ns := req.GetOptions().GetNamespace(); (ns == "" || m.Metadata.Namespace == ns) && sel.Matches(labels.Set(m.Metadata.Labels)) {
			resp.Items = append(resp.Items, proto.Clone(m).(*apiv1.VirtualMachineInstanceMigration))
		}
	}
	return resp, nil
}

// Delete cancels: a migration that has not ended stays, marked, until
// the test ends it (update); one that ended goes at once.
func (f *fakeMigrations) Delete(_ context.Context, req *apiv1.DeleteMigrationRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.migs[vmKey(req.GetKey().GetNamespace(), req.GetKey().GetName())]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "migration %q not found", req.GetKey().GetName())
	}
	f.deleted = append(f.deleted, m.Metadata.Name)
	if apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
		return f.store(apiv1.EventType_DELETED, m), nil
	}
	m = proto.Clone(m).(*apiv1.VirtualMachineInstanceMigration)
	if m.Metadata.DeletionTimestamp == nil {
		m.Metadata.DeletionTimestamp = timestamppb.Now()
	}
	return f.store(apiv1.EventType_MODIFIED, m), nil
}

func (f *fakeMigrations) deletedNames() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deleted...)
}

// Watch lists the matching migrations (resource version 0) or replays
// the events after the version asked for, then follows.
func (f *fakeMigrations) Watch(req *apiv1.WatchMigrationsRequest, stream grpc.ServerStreamingServer[apiv1.MigrationEvent]) error {
	opts := req.GetOptions()
	sel, err := labels.Parse(opts.GetLabelSelector())
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "label_selector: %v", err)
	}
	match := func(m *apiv1.VirtualMachineInstanceMigration) bool {
		return (opts.GetNamespace() == "" || m.Metadata.Namespace == opts.GetNamespace()) &&
			(opts.GetName() == "" || m.Metadata.Name == opts.GetName()) && sel.Matches(labels.Set(m.Metadata.Labels))
	}
	list := func() []*apiv1.MigrationEvent {
		var initial []*apiv1.MigrationEvent
		if rv := opts.GetResourceVersion(); rv > 0 {
			for _, ev := range f.history {
				if ev.ResourceVersion > rv && match(ev.Object) {
					initial = append(initial, proto.Clone(ev).(*apiv1.MigrationEvent))
				}
			}
			return initial
		}
		for _, k := range sortedKeys(f.migs) {
			if m := f.migs[k]; match(m) {
				initial = append(initial, &apiv1.MigrationEvent{Type: apiv1.EventType_ADDED, Object: proto.Clone(m).(*apiv1.VirtualMachineInstanceMigration)})
			}
		}
		return append(initial, &apiv1.MigrationEvent{Type: apiv1.EventType_SYNCED, ResourceVersion: f.rv})
	}
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	f.locked(func() {
		f.opened++
		id := f.opened
		f.cancels[id] = cancel
		context.AfterFunc(ctx, func() { f.locked(func() { delete(f.cancels, id) }) })
	})
	keep := func(ev *apiv1.MigrationEvent) bool { return match(ev.Object) }
	if err := f.serveWatch(ctx, list, keep, stream.Send); err != nil {
		return err
	}
	if stream.Context().Err() == nil {
		return status.Error(codes.Unavailable, "the agent is shutting down")
	}
	return nil
}

// startMigrationFake serves the fake VMs (with Migrate), VMIs, nodes and
// migrations; VM demo in namespace default runs.
func startMigrationFake(t *testing.T) (*fakeMigrations, string) {
	t.Helper()
	migs := newFakeMigrations()
	migs.running[vmKey("default", "demo")] = true
	return migs, serveUnix(t, func(srv *grpc.Server) {
		apiv1.RegisterVirtualMachinesServer(srv, migratingVMs{fakeVMs: newFakeVMs(), migs: migs})
		apiv1.RegisterVirtualMachineInstancesServer(srv, fakeVMIs{})
		apiv1.RegisterNodesServer(srv, fakeNodes{})
		apiv1.RegisterMigrationsServer(srv, migs)
	})
}
