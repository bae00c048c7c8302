package nodeagent

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

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
