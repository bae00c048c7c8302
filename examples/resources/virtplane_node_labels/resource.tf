# Node node-a may run the VMs that hold secrets: an admin's label, which
# the node's agent can neither set nor change nor remove. A compromised
# node cannot label itself tier=secure to draw these VMs to it.
resource "virtplane_node_labels" "node_a" {
  node = "node-a"

  labels = {
    tier               = "secure"
    "example.com/rack" = "r12"
  }
}

# Runs only on nodes an admin labelled tier=secure. Reading the label from
# the resource places the VM after the label is set.
resource "virtplane_virtual_machine" "vault" {
  name   = "vault"
  memory = "2Gi"

  node_selector = {
    tier = virtplane_node_labels.node_a.labels["tier"]
  }

  disk {
    name  = "root"
    image = "debian-12.qcow2"
  }
}
