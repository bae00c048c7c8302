package storage

import (
	"context"
	"errors"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
)

// VMLister says which VMs exist, by uid (the controller's VM cache).
type VMLister interface {
	List() []*apiv1.VirtualMachine
}

// collect removes the images of deleted VMs from rbd class sc's pool:
// volumes and NVRAM stores (ceph.OwnerOf names their VM). An image goes
// only when its VM has been missing from the cache at two passes in a row
// (a VM just made is in the cache long before a node makes its images,
// but a cache that lags must not cost data), nothing has it open (no
// watcher: no QEMU), and it has no snapshot (snapshot contents keep what
// they refer to; deleting them removes their snapshots). orphans carries
// the first sightings from one pass to the next.
func (c *Controller) collect(ctx context.Context, conn *ceph.Conn, sc *apiv1.StorageClass, orphans map[string]bool) (map[string]bool, error) {
	if c.vms == nil {
		return nil, nil
	}
	names, err := conn.List(ctx)
	if err != nil {
		return orphans, err
	}
	live := map[string]bool{}
	for _, vm := range c.vms.List() {
		live[vm.GetMetadata().GetUid()] = true
	}
	next := map[string]bool{}
	var errs []error
	for _, image := range names {
		owner := ceph.OwnerOf(image)
		if owner == "" || live[owner] {
			continue
		}
		if !orphans[image] {
			next[image] = true // seen once: the next pass decides
			continue
		}
		if w, err := conn.Watchers(ctx, image); err != nil || len(w) > 0 {
			next[image] = true
			continue
		}
		if snaps, err := conn.Snaps(ctx, image); err != nil || len(snaps) > 0 {
			next[image] = true
			continue
		}
		if err := conn.Remove(ctx, image); err != nil {
			next[image] = true
			errs = append(errs, err)
			continue
		}
		c.log.Info("deleted VM's image removed", "class", sc.GetMetadata().GetName(), "image", conn.Pool+"/"+image)
	}
	return next, errors.Join(errs...)
}

// orphanSet keeps each class's first sightings between passes.
type orphanSet struct {
	byClass map[string]map[string]bool
}

func (o *orphanSet) get(class string) map[string]bool {
	if o.byClass == nil {
		o.byClass = map[string]map[string]bool{}
	}
	return o.byClass[class]
}

func (o *orphanSet) set(class string, m map[string]bool) {
	if o.byClass == nil {
		o.byClass = map[string]map[string]bool{}
	}
	o.byClass[class] = m
}
