package remotestore

import (
	"context"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Exports watches VirtualMachineExports over the API (a node agent: those
// labelled with its node, which it serves).
type Exports struct {
	c ExportWatcher
}

// ExportWatcher is the watch of the export service.
type ExportWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchExportsRequest, opts ...grpc.CallOption) (apiv1.Exports_WatchClient, error)
}

// NewExports returns the adapter over c.
func NewExports(c ExportWatcher) *Exports { return &Exports{c: c} }

// Watch is as VMIs.Watch.
func (r *Exports) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[*apiv1.VirtualMachineExport], error) {
	stream, err := r.c.Watch(ctx, &apiv1.WatchExportsRequest{Options: watchOptions(opts)})
	if err != nil {
		return nil, fromStatus(err)
	}
	return events[*apiv1.VirtualMachineExport](ctx, stream.Recv), nil
}
