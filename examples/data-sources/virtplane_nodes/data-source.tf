# Every node the agent knows.
data "virtplane_nodes" "all" {}

# Nodes labelled zone=a that carry no maintenance label.
data "virtplane_nodes" "zone_a" {
  label_selector = "zone=a,!maintenance"
}

# Of those, the ones that can take a VM now.
locals {
  usable_nodes = [
    for n in data.virtplane_nodes.zone_a.nodes : n.name
    if n.ready && n.schedulable && !n.unschedulable && n.kvm_usable
  ]
}

output "usable_nodes" {
  value = local.usable_nodes
}

# Fail the plan early instead of creating VMs that cannot be scheduled.
check "zone_a_has_capacity" {
  assert {
    condition     = length(local.usable_nodes) > 0
    error_message = "No ready, schedulable node with KVM in zone a."
  }
}

# Nodes a VM with a bridge interface on br0 can be placed on.
output "nodes_with_br0" {
  value = [for n in data.virtplane_nodes.all.nodes : n.name if contains(n.bridges, "br0")]
}
