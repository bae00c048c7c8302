package vmi

import (
	"fmt"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// BenchmarkPlacementDecision is one placement decision (needs with the
// host-resource policy, candidates and choose) among 100 nodes carrying
// 5,000 instances, for a VMI without interfaces, for one on a bridge,
// whose MAC is looked up on every node, and for one with port forwards,
// half of whose instances forward host ports too: the MAC and host port
// checks must stay a map lookup per placement, not a walk over the
// nodes' instances.
func BenchmarkPlacementDecision(b *testing.B) {
	const nodes, placed = 100, 5000
	var ns []*apiv1.Node
	for i := range nodes {
		ns = append(ns, withNets(node(fmt.Sprintf("n%03d", i), "64", "256Gi", nil), []string{"br0"}, []string{"default"}))
	}
	var vs []*apiv1.VirtualMachineInstance
	for i := range placed {
		v := attached(vmi(fmt.Sprintf("vm%05d", i), 1, "1Gi"), bridgeNet("lan", "br0", fmt.Sprintf("02:00:00:00:%02x:%02x", i>>8, i&0xff)))
		if i%2 == 0 {
			v = withForwards(v, &apiv1.PortForward{HostPort: int32(20000 + i), GuestPort: 80})
		}
		vs = append(vs, on(v, fmt.Sprintf("n%03d", i%nodes), apiv1.PhaseRunning))
	}
	f := newFixture(b, Options{HostPolicy: netPolicy()}, ns, vs...)
	for _, bc := range []struct {
		name string
		v    *apiv1.VirtualMachineInstance
	}{
		{"no interfaces", vmi("new", 1, "1Gi")},
		{"bridge and MAC", attached(vmi("new", 1, "1Gi"), bridgeNet("lan", "br0", "02:00:00:00:00:07"))},
		{"port forwards", withForwards(vmi("new", 1, "1Gi"),
			&apiv1.PortForward{HostPort: 20002, GuestPort: 80}, &apiv1.PortForward{HostPort: 18080, GuestPort: 8080})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, err := request(bc.v.Spec, f.c.opts)
			if err != nil {
				b.Fatal(err)
			}
			now := f.c.opts.Clock()
			for b.Loop() {
				nd := needsOf(bc.v.Spec, req, nil, nil, f.c.opts.HostPolicy, nil)
				d := choose(nd, nil, f.c.candidates(now, "default/new", holdingsOf(bc.v.Spec)))
				if d.node == "" {
					b.Fatal(d.message)
				}
			}
		})
	}
}
