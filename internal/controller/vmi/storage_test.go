package vmi

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

type classMap map[string]*apiv1.StorageClass

func (m classMap) Get(_, name string) (*apiv1.StorageClass, bool) { c, ok := m[name]; return c, ok }

func TestPlacementHonoursStorageClasses(t *testing.T) {
	spec := &apiv1.VirtualMachineInstanceSpec{Volumes: []*apiv1.Volume{
		{Name: "root", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}},
		{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "ceph"}},
	}}
	classes := classMap{"ceph": {Metadata: &apiv1.ObjectMeta{Name: "ceph"}, Spec: &apiv1.StorageClassSpec{
		Rbd: &apiv1.RBDStorage{Pool: "vp"}, NodeSelector: map[string]string{"ceph": "yes"}}}}
	reach := func(n *apiv1.Node, ready bool) *apiv1.Node {
		n.Status.Storage = []*apiv1.NodeStorage{{Class: "ceph", Ready: ready}}
		return n
	}
	req := resources{milliCPU: 100, memory: 64 << 20}
	nodes := []candidate{
		{node: reach(node("a", "4", "8Gi", map[string]string{"ceph": "no"}), true)},   // not selected (a stale report)
		{node: reach(node("b", "4", "8Gi", map[string]string{"ceph": "yes"}), false)}, // selected, monitors unreachable
		{node: node("c", "4", "8Gi", map[string]string{"ceph": "yes"})},               // selected, nothing reported yet
	}
	d := choose(needsOf(spec, req, nil, nil, nil, classes), nil, nodes)
	want := "0/3 nodes are available: 1 node(s) didn't match the node selector of storage class ceph, 2 node(s) could not reach storage class ceph."
	if d.node != "" || d.message != want {
		t.Fatalf("decision = %+v\nwant message %q", d, want)
	}
	// Nodes that say why: the cause, without the CLI's words, and nodes
	// failing alike counted together.
	cause := "the monitors refused the user or key (spec.rbd.user, spec.rbd.key)"
	withCause := append([]candidate(nil), nodes...)
	for _, n := range []string{"e", "f"} {
		nd := node(n, "4", "8Gi", map[string]string{"ceph": "yes"})
		nd.Status.Storage = []*apiv1.NodeStorage{{Class: "ceph", Message: cause + ": permission denied: rbd: monclient(hunting): handle_auth_bad_method"}}
		withCause = append(withCause, candidate{node: nd})
	}
	d = choose(needsOf(spec, req, nil, nil, nil, classes), nil, withCause)
	if want := "2 node(s) could not reach storage class ceph (" + cause + ")"; d.node != "" || !strings.Contains(d.message, want) || strings.Contains(d.message, "monclient") {
		t.Fatalf("decision = %+v\nwant message with %q", d, want)
	}
	nodes = append(nodes, candidate{node: reach(node("d", "4", "8Gi", map[string]string{"ceph": "yes"}), true)})
	if d := choose(needsOf(spec, req, nil, nil, nil, classes), nil, nodes); d.node != "d" {
		t.Fatalf("decision = %+v, want node d", d)
	}
	// A node fenced from the class takes none of its volumes.
	classes["ceph"].Status = &apiv1.StorageClassStatus{Fences: []*apiv1.StorageFence{{Node: "d", Address: "169.254.7.4"}}}
	d = choose(needsOf(spec, req, nil, nil, nil, classes), nil, nodes)
	if d.node != "" || !strings.Contains(d.message, "1 node(s) were fenced from storage class ceph") {
		t.Fatalf("decision with d fenced = %+v", d)
	}
	// A class that does not exist: no node can take it, said once.
	delete(classes, "ceph")
	d = choose(needsOf(spec, req, nil, nil, nil, classes), nil, nodes)
	if d.node != "" || !strings.Contains(d.message, `storage class "ceph" does not exist`) {
		t.Fatalf("decision without the class = %+v", d)
	}
	// Local volumes alone need no class.
	spec.Volumes = spec.Volumes[:1]
	if d := choose(needsOf(spec, req, nil, nil, nil, nil), nil, nodes[:1]); d.node != "a" {
		t.Fatalf("local volumes only: %+v", d)
	}
}

// A node that comes to reach a storage class, or says another cause for
// not reaching it, wakes the waiting VMIs; the CLI's words after the
// cause do not.
func TestPlacementRelevantChangeSeesStorage(t *testing.T) {
	with := func(s ...*apiv1.NodeStorage) *apiv1.Node {
		n := node("n", "4", "8Gi", nil)
		n.Status.Storage = s
		return n
	}
	none := with()
	denied := with(&apiv1.NodeStorage{Class: "ceph", Message: "the monitors refused the user or key (spec.rbd.user, spec.rbd.key): rbd: 1"})
	for _, tc := range []struct {
		before, after *apiv1.Node
		want          bool
	}{
		{none, denied, true},
		{denied, with(&apiv1.NodeStorage{Class: "ceph", Ready: true}), true},
		{denied, with(&apiv1.NodeStorage{Class: "ceph", Message: "no monitor answered (spec.rbd.monitors): rbd: 2"}), true},
		{denied, with(&apiv1.NodeStorage{Class: "ceph", Message: "the monitors refused the user or key (spec.rbd.user, spec.rbd.key): rbd: 3"}), false},
	} {
		if got := placementRelevantChange(tc.before, tc.after); got != tc.want {
			t.Errorf("%v → %v: placement-relevant %v, want %v", tc.before.Status.Storage, tc.after.Status.Storage, got, tc.want)
		}
	}
}
