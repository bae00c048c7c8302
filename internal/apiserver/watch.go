package apiserver

import (
	"context"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// streamWatch relays a store watch to a gRPC stream through send, once
// the selector passed checkSelector.
func streamWatch[T store.Object](ctx context.Context, st store.Store[T], o *apiv1.WatchOptions, send func(apiv1.EventType, T, int64) error) error {
	if err := checkSelector(o.GetLabelSelector()); err != nil {
		return err
	}
	opts := store.WatchOptions{
		ListOptions: store.ListOptions{
			Namespace:     o.GetNamespace(),
			LabelSelector: o.GetLabelSelector(),
		},
		Name:            o.GetName(),
		ResourceVersion: o.GetResourceVersion(),
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	events, err := st.Watch(ctx, opts)
	if err != nil {
		return toStatus(err)
	}
	for ev := range events {
		if ev.Err != nil {
			return toStatus(ev.Err)
		}
		if err := send(ev.Type, ev.Object, ev.Revision); err != nil {
			return err
		}
	}
	return toStatus(ctx.Err())
}

// clusterWatch is streamWatch for a cluster-scoped kind (nodes, images):
// a namespace in the options is ignored.
func clusterWatch[T store.Object](ctx context.Context, st store.Store[T], opts *apiv1.WatchOptions, send func(apiv1.EventType, T, int64) error) error {
	o, _ := proto.Clone(opts).(*apiv1.WatchOptions)
	if o == nil {
		o = &apiv1.WatchOptions{}
	}
	o.Namespace = ""
	return streamWatch(ctx, st, o, send)
}
