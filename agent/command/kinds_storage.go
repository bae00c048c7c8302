package command

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The kind of storage_service.proto: StorageClasses, cluster-scoped and
// an admin's, made by `storageclass create` (storageclass.go) or apply.
// Reads never carry a class's cephx key: the KEY-SET column says whether
// the server holds one.

var storageClassResource = kind[*apiv1.StorageClass, *apiv1.StorageClassEvent]{
	resource: resource{
		Kind: apiv1.KindStorageClass, Singular: "storageclass",
		names:   []string{"storageclass", "storageclasses", "sc"},
		columns: []string{"NAME", "KIND", "WHERE", "NODE-SELECTOR", "READY", "KEY-SET", "AGE"},
	},
	row: func(sc *apiv1.StorageClass, now time.Time) []string {
		kind, where := storageClassWhere(sc)
		keySet := none // a shared filesystem has no key
		if sc.GetSpec().GetRbd() != nil {
			keySet = boolString(sc.GetStatus().GetKeySet())
		}
		return []string{
			sc.GetMetadata().GetName(),
			kind,
			cell(where),
			// kubectl's formatting of a label map: k=v,... sorted, <none>.
			labels.FormatLabels(sc.GetSpec().GetNodeSelector()),
			conditionStatus(sc.GetStatus().GetConditions(), "Ready"),
			keySet,
			age(sc.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.StorageClass, error) {
		return c.StorageClasses.Get(ctx, &apiv1.GetStorageClassRequest{Name: key.GetName()})
	},
	list: func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) ([]*apiv1.StorageClass, error) {
		resp, err := c.StorageClasses.List(ctx, &apiv1.ListStorageClassesRequest{LabelSelector: o.GetLabelSelector()})
		return resp.GetItems(), err
	},
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.StorageClassEvent], error) {
		return c.StorageClasses.Watch(ctx, &apiv1.WatchStorageClassesRequest{Options: o})
	},
	// apply creates first and updates what exists. An rbd class without
	// its key cannot be created (the API requires the key before it
	// looks for the name), yet is a valid update that keeps the stored
	// key: for an existing class, say so as Create would.
	create: func(ctx context.Context, c *client.Client, sc *apiv1.StorageClass) (*apiv1.StorageClass, error) {
		if r := sc.GetSpec().GetRbd(); r != nil && r.GetKey() == "" {
			if _, err := c.StorageClasses.Get(ctx, &apiv1.GetStorageClassRequest{Name: sc.GetMetadata().GetName()}); err == nil {
				return nil, status.Errorf(codes.AlreadyExists, "storage class %q exists", sc.GetMetadata().GetName())
			}
		}
		return c.StorageClasses.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: sc})
	},
	// An rbd key left out of a manifest keeps the stored one.
	update: func(ctx context.Context, c *client.Client, sc *apiv1.StorageClass) (*apiv1.StorageClass, error) {
		return c.StorageClasses.Update(ctx, &apiv1.UpdateStorageClassRequest{StorageClass: sc})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.StorageClass, error) {
		return c.StorageClasses.Delete(ctx, &apiv1.DeleteStorageClassRequest{Name: key.GetName()})
	},
}.define()

// storageClassWhere is a class's kind as the API spells it (rbd,
// shared_filesystem) and where its volumes are: pool@monitors, or the
// mount path.
func storageClassWhere(sc *apiv1.StorageClass) (kind, where string) {
	switch s := sc.GetSpec(); {
	case s.GetRbd() != nil:
		return "rbd", fmt.Sprintf("%s@%s", s.GetRbd().GetPool(), strings.Join(s.GetRbd().GetMonitors(), ","))
	case s.GetSharedFilesystem() != nil:
		return "shared_filesystem", s.GetSharedFilesystem().GetPath()
	}
	return none, ""
}

// conditionStatus is the status of condition typ (True, False), Unknown
// while there is none: nothing has judged it yet.
func conditionStatus(conds []*apiv1.Condition, typ string) string {
	if c := findCondition(conds, typ); c != nil && c.GetStatus() != "" {
		return c.GetStatus()
	}
	return "Unknown"
}
