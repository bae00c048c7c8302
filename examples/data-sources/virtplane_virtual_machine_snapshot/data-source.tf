# A snapshot taken elsewhere (the agent CLI, another configuration).
data "virtplane_virtual_machine_snapshot" "nightly" {
  namespace = "prod"
  name      = "db-nightly"
}

# Fail the plan early when the snapshot cannot be restored from.
check "nightly_usable" {
  assert {
    condition     = data.virtplane_virtual_machine_snapshot.nightly.ready_to_use
    error_message = "prod/db-nightly is ${data.virtplane_virtual_machine_snapshot.nightly.phase}, not ready to use."
  }
}

output "nightly_node" {
  value = data.virtplane_virtual_machine_snapshot.nightly.node_name
}
