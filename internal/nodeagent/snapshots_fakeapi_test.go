package nodeagent

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// fakeStatusStore is the node's side of the snapshot content and restore
// services in memory: status writes with compare-and-swap on the
// resource version, and the server's finalizer rule (a write without the
// node's finalizer removes it, and the object once deleting and without
// finalizers).
type fakeStatusStore[T store.Object] struct {
	mu        sync.Mutex
	objs      map[string]T
	rv        int64
	finalizer string
	// setStatus copies the status of from into to.
	setStatus func(to, from T)
	writes    []T
}

func (f *fakeStatusStore[T]) put(o T) T {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.putLocked(o)
}

func (f *fakeStatusStore[T]) putLocked(o T) T {
	o = proto.Clone(o).(T)
	f.rv++
	o.GetMetadata().ResourceVersion = f.rv
	f.objs[informer.Key(o)] = o
	return proto.Clone(o).(T)
}

func (f *fakeStatusStore[T]) get(key string) (T, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o, ok := f.objs[key]
	if ok {
		o = proto.Clone(o).(T)
	}
	return o, ok
}

func (f *fakeStatusStore[T]) all() []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, o := range f.objs {
		out = append(out, proto.Clone(o).(T))
	}
	return out
}

func (f *fakeStatusStore[T]) update(want T) (T, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var zero T
	cur, ok := f.objs[informer.Key(want)]
	switch {
	case !ok || cur.GetMetadata().GetUid() != want.GetMetadata().GetUid():
		return zero, status.Error(codes.NotFound, "not found")
	case cur.GetMetadata().GetResourceVersion() != want.GetMetadata().GetResourceVersion():
		return zero, status.Error(codes.Aborted, "resource version conflict")
	}
	next := proto.Clone(cur).(T)
	f.setStatus(next, want)
	if !slices.Contains(want.GetMetadata().GetFinalizers(), f.finalizer) {
		md := next.GetMetadata()
		md.Finalizers = slices.DeleteFunc(md.Finalizers, func(s string) bool { return s == f.finalizer })
		if md.DeletionTimestamp != nil && len(md.Finalizers) == 0 {
			delete(f.objs, informer.Key(next))
			f.writes = append(f.writes, proto.Clone(next).(T))
			return next, nil
		}
	}
	f.writes = append(f.writes, proto.Clone(next).(T))
	return f.putLocked(next), nil
}

type fakeContents struct {
	apiv1.SnapshotContentsClient
	*fakeStatusStore[*apiv1.VirtualMachineSnapshotContent]
}

func newFakeContents() *fakeContents {
	return &fakeContents{fakeStatusStore: &fakeStatusStore[*apiv1.VirtualMachineSnapshotContent]{
		objs: map[string]*apiv1.VirtualMachineSnapshotContent{}, finalizer: apiv1.FinalizerSnapshotData,
		setStatus: func(to, from *apiv1.VirtualMachineSnapshotContent) {
			to.Status = proto.Clone(from.GetStatus()).(*apiv1.VirtualMachineSnapshotContentStatus)
		},
	}}
}

func (f *fakeContents) UpdateStatus(_ context.Context, in *apiv1.UpdateSnapshotContentStatusRequest, _ ...grpc.CallOption) (*apiv1.VirtualMachineSnapshotContent, error) {
	return f.update(in.GetContent())
}

type fakeRestores struct {
	apiv1.RestoresClient
	*fakeStatusStore[*apiv1.VirtualMachineRestore]
}

func newFakeRestores() *fakeRestores {
	return &fakeRestores{fakeStatusStore: &fakeStatusStore[*apiv1.VirtualMachineRestore]{
		objs: map[string]*apiv1.VirtualMachineRestore{}, finalizer: apiv1.FinalizerRestoreData,
		setStatus: func(to, from *apiv1.VirtualMachineRestore) {
			to.Status = proto.Clone(from.GetStatus()).(*apiv1.VirtualMachineRestoreStatus)
		},
	}}
}

func (f *fakeRestores) UpdateStatus(_ context.Context, in *apiv1.UpdateRestoreStatusRequest, _ ...grpc.CallOption) (*apiv1.VirtualMachineRestore, error) {
	return f.update(in.GetRestore())
}
