# Patch night for node-b: no new VM lands there (and no migration
# targets it) while this resource exists; removing it from the
# configuration ends the window and uncordons the node.
resource "virtplane_node_maintenance" "node_b" {
  node = "node-b"
}

# Hardware swap on node-c: every VM leaves the node first, as its
# eviction_strategy says (live migration, or a shutdown and a start
# elsewhere), and apply returns once the node is empty. An instance that
# cannot leave fails the apply after timeouts.create, named with the
# reason; the node stays cordoned.
resource "virtplane_node_maintenance" "node_c" {
  node  = "node-c"
  drain = true

  timeouts {
    create = "30m"
  }
}

output "node_c_drained" {
  value = virtplane_node_maintenance.node_c.drained
}
