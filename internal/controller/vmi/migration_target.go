package vmi

import (
	"maps"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// Why a node cannot take a migration target beyond what placement checks.
const (
	reasonSource      = "node(s) were the source"
	reasonAccelerator = "node(s) had another accelerator than the source (KVM or TCG)"
	// reasonNoMigrationAddress: the node registered no migration address
	// (its agent's --migration-address), which every destination is
	// built from.
	reasonNoMigrationAddress = "node(s) take no migrations (no --migration-address)"
)

// PlaceMigrationTarget chooses the node a running instance migrates to:
// the same placement as a new instance (host-resource policy, resources,
// node selector, images, bridges, libvirt networks, MACs, host ports,
// readiness) over every node but the source, only nodes that registered
// a migration address, and only nodes with the source's accelerator (a
// KVM guest's CPU does not exist under TCG, nor the reverse). added
// narrows the
// instance's own node selector; on a key clash the instance's value wins
// (KubeVirt's addedNodeSelector), except the node pin a VM with
// persistent volumes gets, which a migration moves along with the volumes
// (they are copied); a user's own pin to the source node holds (the
// instance then cannot move). It returns the node, or none and why.
func (c *Controller) PlaceMigrationTarget(v *apiv1.VirtualMachineInstance, added map[string]string) (node, message string) {
	req, err := request(v.GetSpec(), c.opts)
	if err != nil {
		return "", err.Error()
	}
	source := v.GetStatus().GetNodeName()
	sel := maps.Clone(added)
	if sel == nil {
		sel = map[string]string{}
	}
	for k, val := range v.GetSpec().GetNodeSelector() {
		if k == apiv1.LabelNodeName && val == source && apiv1.HasLocalVolumes(v.GetSpec()) {
			continue // the VM controller's pin to its volumes, which move
		}
		sel[k] = val
	}
	var kvm, known bool
	if n, ok := c.nodes.Get("", source); ok {
		kvm, known = n.GetStatus().GetNodeInfo().GetKvmUsable(), n.GetStatus().GetNodeInfo() != nil
	}

	c.placeMu.Lock()
	defer c.placeMu.Unlock()
	// Persistent volumes are copied, not recreated from their images.
	nd := needsOf(v.GetSpec(), req, sel, validation.ImageRefs(v.GetSpec(), "", false), c.opts.HostPolicy, c.opts.StorageClasses)
	if nd.refused == "" {
		nd.refused = namespaceRefusal(c.opts.Namespaces, v)
	}
	// Its own key: the instance holds its MACs and host ports on the
	// source, which is excluded anyway, and on no other node.
	cands := c.candidates(c.opts.Clock(), informer.Key(v), holdingsOf(v.GetSpec()))
	for i := range cands {
		n := cands[i].node
		switch {
		case n.GetMetadata().GetName() == source:
			cands[i].excluded = reasonSource
		case n.GetStatus().GetMigrationAddress() == "":
			cands[i].excluded = reasonNoMigrationAddress
		case known && n.GetStatus().GetNodeInfo() != nil && n.GetStatus().GetNodeInfo().GetKvmUsable() != kvm:
			cands[i].excluded = reasonAccelerator
		}
	}
	d := choose(nd, c.pullable, cands)
	return d.node, d.message
}
