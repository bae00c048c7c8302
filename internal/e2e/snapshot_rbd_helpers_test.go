package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// rbdPool is a pool of a test's own on the shared Ceph cluster.
type rbdPool struct {
	cl   *cephtest.Cluster
	name string
}

// rbdClassOwnPool makes storage class name on a pool of the test's own on
// the shared cluster, with a user of its own, and waits until the server
// reaches it. The other clusters of the package's tests share the Ceph
// cluster, and their storage controllers collect what their stores do not
// know in their classes' pools (one virtplane cluster per pool,
// docs/snapshots.md): a pool of its own keeps this test's images and
// snapshots out of their reach, and theirs out of this one's.
func (c *mnCluster) rbdClassOwnPool(name string) (string, rbdPool) {
	c.t.Helper()
	cl, _ := sharedCeph.Get(c.t)
	pool := rbdPool{cl: cl, name: strings.ReplaceAll("p-"+c.ns, "_", "-")}
	if err := cl.CreatePool(c.ctx, pool.name); err != nil {
		c.t.Fatal(err)
	}
	user := "e2e-" + c.ns + "-" + name
	key, err := cl.CreateUser(c.ctx, user, rbdCaps(pool.name)...)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.api.StorageClasses.Create(c.ctx, &apiv1.CreateStorageClassRequest{StorageClass: &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{
			Monitors: cl.Monitors(), Pool: pool.name, User: user, Key: strings.TrimSpace(key),
		}},
	}}); err != nil {
		c.t.Fatal(err)
	}
	testutil.Eventually(c.t, stateTimeout, "storage class "+name+" ready", func() bool {
		got, err := c.api.StorageClasses.Get(c.ctx, &apiv1.GetStorageClassRequest{Name: name})
		return err == nil && apiv1.IsConditionTrue(got.GetStatus().GetConditions(), apiv1.ConditionReady)
	})
	return name, pool
}

// rbd runs rbd as client.admin on the pool's cluster.
func (p rbdPool) rbd(t *testing.T, args ...string) []byte {
	t.Helper()
	out, err := p.cl.Admin(t.Context(), "rbd", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rbdImages lists the pool's images whose names hold s.
func rbdImages(t *testing.T, p rbdPool, s string) []string {
	t.Helper()
	out, err := p.cl.Admin(t.Context(), "rbd", "ls", p.name)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range strings.Fields(string(out)) {
		if strings.Contains(n, s) {
			names = append(names, n)
		}
	}
	return names
}

// rbdSnapshotsNamed lists the pool's user snapshots named snap
// (pool/image@snap); a snapshot Ceph keeps in its trash for clones is not
// one.
func rbdSnapshotsNamed(t *testing.T, p rbdPool, snap string) []string {
	t.Helper()
	out, err := p.cl.Admin(t.Context(), "rbd", "ls", "-l", "--format", "json", p.name)
	if err != nil {
		t.Fatal(err)
	}
	var entries []struct {
		Image    string `json:"image"`
		Snapshot string `json:"snapshot"`
	}
	if err := json.Unmarshal(out, &entries); err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, e := range entries {
		if e.Snapshot == snap {
			found = append(found, p.name+"/"+e.Image+"@"+e.Snapshot)
		}
	}
	return found
}

// rbdTimeout bounds the collection of a deleted VM's images: a grace and
// a pass of the storage controller's collection after the delete.
const rbdTimeout = 90 * time.Second
