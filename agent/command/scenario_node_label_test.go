package command

import (
	"regexp"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// `node label` sets and removes an admin's labels as kubectl label does
// (a change needs --overwrite), `get nodes --show-labels` lists them, and
// a VM selecting one runs only on the node an admin labelled.
func TestScenarioNodeLabel(t *testing.T) {
	s := newScenario(t, "node-a", "node-b")
	secure := scenarioVM("secure", "Always", "", "")
	secure.Spec.Template.Spec.NodeSelector = map[string]string{"tier": "secure"}
	s.create(secure)
	testutil.Eventually(t, 30*time.Second, "the VM selecting tier=secure to be unschedulable", func() bool {
		return s.vm("secure").GetStatus().GetPrintableStatus() == apiv1.PrintableErrorUnschedulable
	})

	if out, err := s.runCLI("node", "label", "node-b", "tier=secure", "example.com/rack=r1"); err != nil || out != "node \"node-b\" labelled\n" {
		t.Fatalf("node label: %q, %v", out, err)
	}
	if got := s.waitRunning("secure", "").GetStatus().GetNodeName(); got != "node-b" {
		t.Fatalf("the VM selecting tier=secure runs on %s, not the node labelled so", got)
	}
	out, err := s.runCLI("get", "nodes", "--show-labels")
	if err != nil || !regexp.MustCompile(`(?m)^NAME\s.*\sLABELS$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^node-b\s.*\sexample\.com/rack=r1,tier=secure,virtplane\.io/node-name=node-b$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^node-a\s.*\svirtplane\.io/node-name=node-a$`).MatchString(out) {
		t.Fatalf("get nodes --show-labels:\n%s%v", out, err)
	}

	_, err = s.runCLI("node", "label", "node-b", "tier=public")
	if err == nil || !strings.Contains(err.Error(), "tier=secure") || !strings.Contains(err.Error(), "overwrite") {
		t.Fatalf("changing a label without --overwrite: %v", err)
	}
	if _, err := s.runCLI("node", "label", "node-b", "tier=public", "example.com/rack-", "--overwrite"); err != nil {
		t.Fatal(err)
	}
	n, err := s.c.Nodes.Get(s.ctx, &apiv1.GetNodeRequest{Name: "node-b"})
	if err != nil {
		t.Fatal(err)
	}
	if l := n.Metadata.Labels; l["tier"] != "public" || l["example.com/rack"] != "" || len(l) != 2 {
		t.Fatalf("labels after overwrite and removal: %v", l)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"node-b", apiv1.LabelKVM + "=true"}, `Node "node-b" is invalid:`},
		{[]string{"node-b", apiv1.LabelKVM + "=true"}, "set[node.virtplane.io/kvm]"},
		{[]string{"node-b", apiv1.LabelNodeName + "-"}, "remove[0]"},
		{[]string{"node-b", "tier"}, `"tier" is neither KEY=VALUE`},
		{[]string{"node-b", "tier=a", "tier-"}, `label "tier" is both set and removed`},
		{[]string{"nope", "tier=a"}, `node "nope" not found`},
	} {
		if _, err := s.runCLI(append([]string{"node", "label"}, tc.args...)...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("node label %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}
