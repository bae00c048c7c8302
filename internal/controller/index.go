package controller

import apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

// VMINodeIndex is the name of the VMI informer index by status.node_name,
// which every controller that asks "which instances are on this node"
// registers with IndexVMIByNode.
const VMINodeIndex = "node"

// IndexVMIByNode is the VMINodeIndex function: a placed VMI's node.
func IndexVMIByNode(v *apiv1.VirtualMachineInstance) []string {
	if n := v.GetStatus().GetNodeName(); n != "" {
		return []string{n}
	}
	return nil
}
