package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// sharedCeph is the package's Ceph cluster (one mon, one OSD) in a hub of
// its own with a host link, started by the first test that asks for it
// and closed by TestMain. Multi-node tests put their hosts on its hub
// (mnOptions.hub), so that nodes and the server reach its monitors.
var sharedCeph cephtest.Shared

// rbdClass makes a restricted cephx user and an rbd StorageClass for it,
// both named after the test's namespace, on the shared cluster, and
// returns the class's name. The user has the caps docs/storage.md asks
// for.
func (c *mnCluster) rbdClass(cl *cephtest.Cluster) string {
	c.t.Helper()
	name := strings.ToLower("rbd-" + c.ns)
	key, err := cl.CreateUser(c.ctx, name, "mon", `profile rbd, allow command "osd blocklist" with blocklistop=rm`,
		"osd", "profile rbd pool="+cl.Pool())
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.api.StorageClasses.Create(c.ctx, &apiv1.CreateStorageClassRequest{StorageClass: &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{
			Monitors: cl.Monitors(), Pool: cl.Pool(), User: name, Key: key,
		}},
	}}); err != nil {
		c.t.Fatal(err)
	}
	return name
}

// onSharedCeph starts a multi-node cluster whose hosts are on the shared
// Ceph cluster's hub.
func onSharedCeph(t *testing.T, o mnOptions) (*mnCluster, *cephtest.Cluster) {
	t.Helper()
	requireEnv(t)
	cl, run := sharedCeph.Get(t)
	o.hub = run
	c := newMultiNodeCluster(t, o)
	return c, cl
}

// rbdImages lists the shared cluster's images whose names hold s.
func rbdImages(t *testing.T, cl *cephtest.Cluster, s string) []string {
	t.Helper()
	out, err := cl.Admin(t.Context(), "rbd", "ls", cl.Pool())
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

// rbdSnapshotsNamed lists the shared cluster's user snapshots named snap
// (pool/image@snap); a snapshot Ceph keeps in its trash for clones is not
// one.
func rbdSnapshotsNamed(t *testing.T, cl *cephtest.Cluster, snap string) []string {
	t.Helper()
	out, err := cl.Admin(t.Context(), "rbd", "ls", "-l", "--format", "json", cl.Pool())
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
			found = append(found, cl.Pool()+"/"+e.Image+"@"+e.Snapshot)
		}
	}
	return found
}

// rbdTimeout bounds the collection of a deleted VM's images: a grace and
// a pass of the storage controller's collection after the delete.
const rbdTimeout = 90 * time.Second
