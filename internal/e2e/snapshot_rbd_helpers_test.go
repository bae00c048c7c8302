package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

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
