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
	stream, err := v.c.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: &apiv1.WatchOptions{
		Namespace: opts.Namespace, LabelSelector: opts.LabelSelector, Name: opts.Name,
		ResourceVersion: opts.ResourceVersion,
	}})
	if err != nil {
		return nil, fromStatus(err)
	}
	out := make(chan store.Event[*apiv1.VirtualMachineInstance])
	go func() {
		defer close(out)
		for {
			ev, err := stream.Recv()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if errors.Is(err, io.EOF) {
					err = errors.New("watch stream ended by the server")
				}
				select {
				case out <- store.Event[*apiv1.VirtualMachineInstance]{Err: fromStatus(err)}:
				case <-ctx.Done():
				}
				return
			}
			select {
			case out <- store.Event[*apiv1.VirtualMachineInstance]{Type: ev.Type, Object: ev.Object, Revision: ev.ResourceVersion}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
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
