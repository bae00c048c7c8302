// Package remotestore adapts the agent's gRPC watch to the store's
// Watcher, so that an informer runs on a node that reaches the control
// plane only through the API. It reads nothing else and has no write
// methods: node agents write through the API's own verbs (UpdateStatus).
package remotestore

import (
	"context"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// VMIs watches VirtualMachineInstances over the API.
type VMIs struct {
	c apiv1.VirtualMachineInstancesClient
}

// NewVMIs returns the adapter over c.
func NewVMIs(c apiv1.VirtualMachineInstancesClient) *VMIs { return &VMIs{c: c} }

// Watch streams the API's watch as store events. When the stream breaks
// the last event carries Err, as the etcd store's watch does, so the
// informer resumes from its last revision.
func (v *VMIs) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[*apiv1.VirtualMachineInstance], error) {
	stream, err := v.c.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: watchOptions(opts)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return events[*apiv1.VirtualMachineInstance](ctx, stream.Recv), nil
}

// Images watches Images over the API.
type Images struct {
	c ImageWatcher
}

// ImageWatcher is the watch of the image service.
type ImageWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchImagesRequest, opts ...grpc.CallOption) (apiv1.Images_WatchClient, error)
}

// NewImages returns the adapter over c.
func NewImages(c ImageWatcher) *Images { return &Images{c: c} }

// Watch is as VMIs.Watch.
func (i *Images) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[*apiv1.Image], error) {
	stream, err := i.c.Watch(ctx, &apiv1.WatchImagesRequest{Options: watchOptions(opts)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return events[*apiv1.Image](ctx, stream.Recv), nil
}

// SnapshotContents watches VirtualMachineSnapshotContents over the API
// (a node agent: those labelled with its node).
type SnapshotContents struct {
	c SnapshotContentWatcher
}

// SnapshotContentWatcher is the watch of the snapshot content service.
type SnapshotContentWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchSnapshotContentsRequest, opts ...grpc.CallOption) (apiv1.SnapshotContents_WatchClient, error)
}

// NewSnapshotContents returns the adapter over c.
func NewSnapshotContents(c SnapshotContentWatcher) *SnapshotContents { return &SnapshotContents{c: c} }

// Watch is as VMIs.Watch.
func (s *SnapshotContents) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[*apiv1.VirtualMachineSnapshotContent], error) {
	stream, err := s.c.Watch(ctx, &apiv1.WatchSnapshotContentsRequest{Options: watchOptions(opts)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return events[*apiv1.VirtualMachineSnapshotContent](ctx, stream.Recv), nil
}

// Restores watches VirtualMachineRestores over the API (a node agent:
// those labelled with its node).
type Restores struct {
	c RestoreWatcher
}

// RestoreWatcher is the watch of the restore service.
type RestoreWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchRestoresRequest, opts ...grpc.CallOption) (apiv1.Restores_WatchClient, error)
}

// NewRestores returns the adapter over c.
func NewRestores(c RestoreWatcher) *Restores { return &Restores{c: c} }

// Watch is as VMIs.Watch.
func (r *Restores) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[*apiv1.VirtualMachineRestore], error) {
	stream, err := r.c.Watch(ctx, &apiv1.WatchRestoresRequest{Options: watchOptions(opts)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return events[*apiv1.VirtualMachineRestore](ctx, stream.Recv), nil
}

func watchOptions(opts store.WatchOptions) *apiv1.WatchOptions {
	return &apiv1.WatchOptions{
		Namespace: opts.Namespace, LabelSelector: opts.LabelSelector, Name: opts.Name,
		ResourceVersion: opts.ResourceVersion,
	}
}

// event is a watch event of the API.
type event[T store.Object] interface {
	GetType() apiv1.EventType
	GetObject() T
	GetResourceVersion() int64
}

// events turns a watch stream's messages into store events until the
// stream breaks (a last event carries the error) or ctx ends.
func events[T store.Object, E event[T]](ctx context.Context, recv func() (E, error)) <-chan store.Event[T] {
	out := make(chan store.Event[T])
	go func() {
		defer close(out)
		for {
			ev, err := recv()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, io.EOF) {
					err = errors.New("watch stream ended by the server")
				}
				select {
				case out <- store.Event[T]{Err: fromStatus(err)}:
				case <-ctx.Done():
				}
				return
			}
			select {
			case out <- store.Event[T]{Type: ev.GetType(), Object: ev.GetObject(), Revision: ev.GetResourceVersion()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// fromStatus maps API status codes back to the store's sentinels, so
// callers match errors the same way on both sides of the API.
func fromStatus(err error) error {
	var sentinel error
	switch status.Code(err) {
	case codes.NotFound:
		sentinel = store.ErrNotFound
	case codes.AlreadyExists:
		sentinel = store.ErrAlreadyExists
	case codes.Aborted:
		sentinel = store.ErrConflict
	case codes.InvalidArgument:
		sentinel = store.ErrInvalid
	default:
		return err
	}
	return fmt.Errorf("%w: %w", sentinel, err)
}
