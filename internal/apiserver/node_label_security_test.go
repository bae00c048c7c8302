package apiserver

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Issue 33, defect 5: Register took any label but virtplane.io/node-name,
// so a node holding its own certificate labelled itself tier=secure and
// drew the VMs that select that label, and their cloud-init secrets. A
// node now sets only its own labels (node.virtplane.io/); the others are
// an admin's, which no call of a node changes or removes.
func TestNodeCannotLabelItself(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a := e.join("node-a")
	register := func(labels map[string]string) error {
		_, err := a.c.Nodes.Register(ctx(), &apiv1.RegisterNodeRequest{Node: labelNode("node-a", labels)})
		return err
	}
	stored := func() map[string]string {
		t.Helper()
		n, err := e.st.Nodes.Get(ctx(), "", "node-a")
		if err != nil {
			t.Fatal(err)
		}
		return n.GetMetadata().GetLabels()
	}

	// The attack: the node registers with the label the secure VMs select.
	err := register(map[string]string{apiv1.LabelKVM: "true", "tier": "secure"})
	wantInvalid(t, err, "metadata.labels[tier]")
	if _, err := e.st.Nodes.Get(ctx(), "", "node-a"); err == nil {
		t.Fatal("the refused registration stored the node")
	}
	if err := register(map[string]string{apiv1.LabelKVM: "true"}); err != nil {
		t.Fatal(err)
	}

	// An admin labels the node; its registrations and heartbeats keep it.
	if _, err := e.admin().Nodes.Label(ctx(), &apiv1.LabelNodeRequest{Name: "node-a", Set: map[string]string{"tier": "secure"}}); err != nil {
		t.Fatal(err)
	}
	if err := register(map[string]string{apiv1.LabelKVM: "false"}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.c.Nodes.Heartbeat(ctx(), &apiv1.HeartbeatRequest{Name: "node-a", Schedulable: true}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{apiv1.LabelKVM: "false", "tier": "secure", apiv1.LabelNodeName: "node-a"}
	wantLabels(t, "after the node re-registered and beat", &apiv1.Node{Metadata: &apiv1.ObjectMeta{Labels: stored()}}, want)

	// It can neither change nor remove the admin's label, nor set another.
	wantInvalid(t, register(map[string]string{"tier": "public"}), "metadata.labels[tier]")
	wantInvalid(t, register(map[string]string{"tier": ""}), "metadata.labels[tier]")
	wantInvalid(t, register(map[string]string{apiv1.LabelNodeName: "node-b"}), "metadata.labels[virtplane.io/node-name]")
	_, err = a.c.Nodes.Label(ctx(), &apiv1.LabelNodeRequest{Name: "node-a", Remove: []string{"tier"}})
	wantCode(t, "the node removing the admin's label", err, codes.PermissionDenied)
	_, err = a.c.Nodes.Label(ctx(), &apiv1.LabelNodeRequest{Name: "node-a", Set: map[string]string{"tier": "public"}, Overwrite: true})
	wantCode(t, "the node changing the admin's label", err, codes.PermissionDenied)
	_, err = a.c.Nodes.Label(ctx(), &apiv1.LabelNodeRequest{Name: "node-a", Set: map[string]string{"gpu": "true"}})
	wantCode(t, "the node adding an admin label", err, codes.PermissionDenied)
	// A flood of its own labels cannot crowd the admin's out either.
	flood := map[string]string{}
	for i := range validation.MaxLabels {
		flood[fmt.Sprintf("%sl%d", apiv1.NodeLabelPrefix, i)] = "x"
	}
	wantInvalid(t, register(flood), "metadata.labels")
	wantLabels(t, "after the refused calls", &apiv1.Node{Metadata: &apiv1.ObjectMeta{Labels: stored()}}, want)

	// An admin still may not set or remove the node's own labels.
	_, err = e.admin().Nodes.Label(ctx(), &apiv1.LabelNodeRequest{Name: "node-a", Remove: []string{apiv1.LabelKVM}})
	wantInvalid(t, err, "remove[0]")
}
