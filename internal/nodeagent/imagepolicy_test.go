package nodeagent

import (
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The node has no image policy until its first heartbeat's answer brings
// the server's; it keeps that one when an answer carries none or an
// invalid one.
func TestImagePolicyFromHeartbeat(t *testing.T) {
	h := newHarness(t)
	a, _ := h.runAgent()
	testutil.Eventually(t, waitTimeout, "the server's image policy", func() bool {
		_, ok := a.imagePolicy.Get()
		return ok
	})
	got, _ := a.imagePolicy.Get()
	if !proto.Equal(got.Proto(), imagepolicy.Default().Proto()) {
		t.Fatalf("policy %v, want the server's (the default)", got.Proto())
	}
	if a.maxVirtualSize() != imagepolicy.Default().MaxVirtualSize {
		t.Fatalf("maxVirtualSize %d", a.maxVirtualSize())
	}
	// The rest on an agent of its own, whose heartbeats cannot interleave.
	a = &Agent{log: a.log}
	if _, ok := a.imagePolicy.Get(); ok || a.maxVirtualSize() != imagepolicy.Default().MaxVirtualSize {
		t.Fatal("a new agent has a policy")
	}
	a.takeImagePolicy(got.Proto())
	a.takeImagePolicy(nil)
	bad := imagepolicy.Default().Proto()
	bad.SourceCidrs = []string{"10.0.0.1/8"}
	a.takeImagePolicy(bad)
	bad = imagepolicy.Default().Proto()
	bad.MaxSizeCapBytes = 1
	a.takeImagePolicy(bad)
	if p, _ := a.imagePolicy.Get(); !proto.Equal(p.Proto(), got.Proto()) {
		t.Fatalf("policy %v after a missing and invalid ones, want the last valid one", p.Proto())
	}
	better := &apiv1.ImagePullPolicy{}
	proto.Merge(better, got.Proto())
	better.SourceCidrs = []string{"10.20.0.0/16"}
	a.takeImagePolicy(better)
	if p, _ := a.imagePolicy.Get(); len(p.SourceCIDRs) != 1 || p.SourceCIDRs[0].String() != "10.20.0.0/16" {
		t.Fatalf("policy %v, want the new one", p.Proto())
	}
}
