package client

import (
	"context"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// ListPageSize is the page size of ListAll: kubectl's default chunk size.
// One response of 100,000 VMs would exceed gRPC's 4 MiB message limit.
const ListPageSize = 500

// ListResponse is any List response: one page of items, the revision the
// list is read at and the token of the next page.
type ListResponse[T any] interface {
	GetItems() []T
	GetResourceVersion() int64
	GetContinue() string
}

// ListAll calls list a page of ListPageSize at a time until the server
// sends no continue token, and returns every item and the revision of the
// list. The pages are one consistent read at the first page's revision;
// items come in the server's key order, not sorted by namespace/name. A
// server that does not page sends everything in the first response. If
// the token expires between pages (the server compacted that revision),
// the error is the server's FailedPrecondition: callers list again.
func ListAll[T any, R ListResponse[T]](ctx context.Context, opts *apiv1.ListOptions, list func(context.Context, *apiv1.ListOptions) (R, error)) ([]T, int64, error) {
	o, _ := proto.Clone(opts).(*apiv1.ListOptions)
	if o == nil {
		o = &apiv1.ListOptions{}
	}
	if o.Limit == 0 {
		o.Limit = ListPageSize
	}
	var (
		items []T
		rev   int64
	)
	for first := true; ; first = false {
		resp, err := list(ctx, o)
		if err != nil {
			// The server's status as it is: callers map its code and
			// message for users.
			return nil, 0, err
		}
		items = append(items, resp.GetItems()...)
		if first {
			rev = resp.GetResourceVersion()
		}
		if resp.GetContinue() == "" {
			return items, rev, nil
		}
		o.Continue = resp.GetContinue()
	}
}
