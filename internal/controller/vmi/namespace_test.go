package vmi

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// namespaces is a NamespaceLister over fixed objects.
type namespaces map[string]*apiv1.Namespace

func (n namespaces) Get(_, name string) (*apiv1.Namespace, bool) {
	obj, ok := n[name]
	return obj, ok
}

// An instance whose namespace no longer allows one of its host resources
// (the namespace changed after admission, or it was written past the
// API) is not placed, and its PodScheduled condition says which; one the
// namespace allows is placed as before.
func TestPlaceRefusesWhatTheNamespaceDisallows(t *testing.T) {
	nodes := []*apiv1.Node{withNets(node("n1", "4", "8Gi", nil), []string{"br0", "br9"}, nil)}
	nss := namespaces{"default": {Metadata: &apiv1.ObjectMeta{Name: "default"}, Spec: &apiv1.NamespaceSpec{
		Allowed: &apiv1.NamespaceAllowed{Bridges: &apiv1.StringList{Items: []string{"br0"}}}}}}
	f := newFixture(t, Options{HostPolicy: netPolicy(), Namespaces: nss}, nodes,
		attached(vmi("ok", 1, "1Gi"), bridgeNet("lan", "br0", "")),
		attached(vmi("denied", 1, "1Gi"), bridgeNet("lan", "br9", "")),
	)
	if _, err := f.reconcile("ok"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("ok").Status.NodeName; got != "n1" {
		t.Errorf("ok placed on %q, want n1", got)
	}
	if _, err := f.reconcile("denied"); err != nil {
		t.Fatal(err)
	}
	v := f.stored("denied")
	if v.Status.NodeName != "" {
		t.Fatalf("denied placed on %s", v.Status.NodeName)
	}
	c := apiv1.FindCondition(v.Status.Conditions, apiv1.ConditionPodScheduled)
	want := `0/1 nodes are available: namespace default does not allow the instance's host resources: spec.networks[0].bridge.bridge: Forbidden: bridge "br9" is not allowed in namespace default (allowed: br0).`
	if c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonUnschedulable || c.GetMessage() != want {
		t.Errorf("PodScheduled = %v; want False/%s %q", c, ReasonUnschedulable, want)
	}
}
