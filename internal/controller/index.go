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

// MigrationVMIIndex is the name of the migration informer index by
// "namespace/instance name", registered with IndexMigrationByVMI by every
// controller that asks "which migrations move this instance".
const MigrationVMIIndex = "vmi"

// IndexMigrationByVMI is the MigrationVMIIndex function.
func IndexMigrationByVMI(m *apiv1.VirtualMachineInstanceMigration) []string {
	return []string{MigrationVMIKey(m)}
}

// MigrationVMIKey is the MigrationVMIIndex value of m: its instance's
// informer key.
func MigrationVMIKey(m *apiv1.VirtualMachineInstanceMigration) string {
	return m.GetMetadata().GetNamespace() + "/" + m.GetSpec().GetVmiName()
}
