# A pool managed elsewhere (another configuration, the agent CLI).
data "virtplane_virtual_machine_pool" "db" {
  namespace = "prod"
  name      = "db"
}

locals {
  db = data.virtplane_virtual_machine_pool.db
}

output "db_vms" {
  value = local.db.status.vm_names
}

# Fail the plan early while a rollout is under way or a VM is not ready.
check "db_settled" {
  assert {
    condition     = local.db.status.ready_replicas == local.db.replicas && local.db.status.updated_replicas == local.db.replicas
    error_message = "prod/db: ${local.db.status.ready_replicas} of ${local.db.replicas} VMs ready, ${local.db.status.updated_replicas} on the current template."
  }
}
