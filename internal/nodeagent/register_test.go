package nodeagent

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What the agent registers passes the server's node validation for any
// real host: quantities in canonical form, allocatable within capacity.
func TestRegisteredNodeIsValid(t *testing.T) {
	h := newHarness(t)
	for _, mem := range []int64{8 << 30, 8167432193, 8_000_000_000, 1 << 30, 64 << 40, 512 << 20} {
		a := h.newAgent(func(o *Options) {
			host := *o.Host
			host.MemoryBytes = mem
			host.CPUs = 192
			o.Host = &host
			reserved := resource.MustParse("1Gi")
			o.ReservedMemory = &reserved
		})
		n := a.node(h.ctx)
		if errs := validation.ValidateNode(n); len(errs) > 0 {
			t.Errorf("memory %d: the node registers %v, which the server refuses: %v", mem, n.GetStatus(), errs.ToAggregate())
		}
	}
}

// The node registers with its configured labels (serve --node-labels) and
// the KVM label; labels the server would refuse are refused at start,
// naming the flag and the key.
func TestNodeLabels(t *testing.T) {
	h := newHarness(t)
	a := h.newAgent(func(o *Options) { o.Labels = map[string]string{"node.virtplane.io/disk": "ssd"} })
	n := a.node(h.ctx)
	if l := n.Metadata.Labels; len(l) != 2 || l["node.virtplane.io/disk"] != "ssd" || l[apiv1.LabelKVM] != "false" {
		t.Fatalf("labels %v", l)
	}
	if errs := validation.ValidateNode(n); len(errs) > 0 {
		t.Fatalf("the server refuses them: %v", errs.ToAggregate())
	}
	many := map[string]string{}
	for i := range validation.MaxNodeOwnedLabels - 1 {
		many[fmt.Sprintf("node.virtplane.io/l%d", i)] = "x"
	}
	if err := CheckLabels(many); err != nil {
		t.Fatalf("as many as fit with the KVM label: %v", err)
	}
	many["node.virtplane.io/one-more"] = "x"
	for _, tc := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"tier": "secure"}, "node-labels[tier]: Forbidden: a node may set only labels under node.virtplane.io/"},
		{map[string]string{apiv1.LabelNodeName: "x"}, "node-labels[virtplane.io/node-name]: Forbidden"},
		{map[string]string{apiv1.LabelKVM: "true"}, "node-labels[node.virtplane.io/kvm]: Forbidden: the node agent sets node.virtplane.io/kvm"},
		{map[string]string{"virtplane.io/kvm": "true"}, "node-labels[virtplane.io/kvm]: Forbidden: the node agent sets node.virtplane.io/kvm"},
		{map[string]string{"node.virtplane.io/disk": "s s d"}, "node-labels[node.virtplane.io/disk]: Invalid value"},
		{many, "node-labels: Too many: 17"},
	} {
		err := CheckLabels(tc.labels)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("CheckLabels(%v) = %v, want %q", tc.labels, err, tc.want)
		}
	}
}

// The agent registers its --migration-address, which the server builds
// every destination from; one that names no host in particular is refused
// at start.
func TestRegistersTheMigrationAddress(t *testing.T) {
	h := newHarness(t)
	a := h.newAgent(func(o *Options) { o.Migration.Address = "169.254.7.2" })
	if got := a.node(h.ctx).GetStatus().GetMigrationAddress(); got != "169.254.7.2" {
		t.Fatalf("registers migration address %q, want 169.254.7.2", got)
	}
	for _, addr := range []string{"127.0.0.1", "0.0.0.0", "node-b", "10.0.0.2:16514"} {
		o := h.options()
		o.Migration.Address = addr
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), "migration address") {
			t.Errorf("--migration-address %s: %v; want it refused", addr, err)
		}
	}
}
