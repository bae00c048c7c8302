package e2e

import (
	"strings"
	"sync"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// sharedCeph is the package's one Ceph cluster, in a hub of its own that
// the multi-node tests with mnOptions.ceph put their nodes on; TestMain
// stops it.
var sharedCeph cephtest.Shared

// rbdCaps are the caps docs/storage.md asks a class's user to have: RBD
// on the pool, and lifting the blocklist entries the server adds when it
// fences a node.
func rbdCaps(pool string) []string {
	return []string{"mon", `profile rbd, allow command "osd blocklist" with blocklistop=rm`, "osd", "profile rbd pool=" + pool}
}

// pools are the pools made on the shared cluster, one per test cluster:
// every virtplane cluster's server removes the images its store does not
// know from its classes' pools (docs/storage.md: one pool per virtplane
// cluster), so tests running side by side must not share one.
var pools struct {
	sync.Mutex
	made map[string]bool
}

// cephPool is the test cluster's pool on the shared Ceph cluster, made on
// first use.
func (c *mnCluster) cephPool() string {
	c.t.Helper()
	name := "vp-" + c.ns
	pools.Lock()
	defer pools.Unlock()
	if pools.made[name] {
		return name
	}
	cl, _ := sharedCeph.Get(c.t)
	if err := cl.CreatePool(c.ctx, name); err != nil {
		c.t.Fatal(err)
	}
	if pools.made == nil {
		pools.made = map[string]bool{}
	}
	pools.made[name] = true
	return name
}

// rbdClass makes a storage class on the test cluster's pool, with a user
// of its own, selecting every node; it waits until the server reaches it.
func (c *mnCluster) rbdClass(name string) *apiv1.StorageClass {
	c.t.Helper()
	cl, _ := sharedCeph.Get(c.t)
	user := "e2e-" + c.ns + "-" + name
	key, err := cl.CreateUser(c.ctx, user, rbdCaps(c.cephPool())...)
	if err != nil {
		c.t.Fatal(err)
	}
	sc, err := c.api.StorageClasses.Create(c.ctx, &apiv1.CreateStorageClassRequest{StorageClass: &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{
			Monitors: cl.Monitors(), Pool: c.cephPool(), User: user, Key: strings.TrimSpace(key),
		}},
	}})
	if err != nil {
		c.t.Fatal(err)
	}
	testutil.Eventually(c.t, stateTimeout, "storage class "+name+" ready", func() bool {
		got, err := c.api.StorageClasses.Get(c.ctx, &apiv1.GetStorageClassRequest{Name: name})
		return err == nil && apiv1.IsConditionTrue(got.GetStatus().GetConditions(), apiv1.ConditionReady)
	})
	return sc
}

// waitNodesReach waits until every node reports class reachable.
func (c *mnCluster) waitNodesReach(class string) {
	c.t.Helper()
	for _, n := range c.nodes {
		testutil.Eventually(c.t, stateTimeout, n.Name+" reaching storage class "+class, func() bool {
			node, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: n.Name})
			if err != nil {
				return false
			}
			for _, s := range node.GetStatus().GetStorage() {
				if s.GetClass() == class {
					return s.GetReady()
				}
			}
			return false
		})
	}
}

// rbdImageOf is the pool's image of volume vol of vm.
func rbdImageOf(vm *apiv1.VirtualMachine, vol string) string {
	return ceph.VolumeImage(vm.GetMetadata().GetUid(), vol)
}
