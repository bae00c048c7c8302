package remotestore

import (
	"context"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Adoptions watches VirtualMachineAdoptions over the API (a node agent:
// those labelled with its node).
type Adoptions struct {
	c AdoptionWatcher
}

// AdoptionWatcher is the watch of the adoption service.
type AdoptionWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchAdoptionsRequest, opts ...grpc.CallOption) (apiv1.Adoptions_WatchClient, error)
}

// NewAdoptions returns the adapter over c.
func NewAdoptions(c AdoptionWatcher) *Adoptions { return &Adoptions{c: c} }

// Watch is as VMIs.Watch.
func (a *Adoptions) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[*apiv1.VirtualMachineAdoption], error) {
	stream, err := a.c.Watch(ctx, &apiv1.WatchAdoptionsRequest{Options: watchOptions(opts)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return events[*apiv1.VirtualMachineAdoption](ctx, stream.Recv), nil
}
