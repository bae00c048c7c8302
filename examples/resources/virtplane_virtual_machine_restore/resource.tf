# Roll the database VM back to its snapshot. The VM must be stopped: here
# StopTarget stops it; it stays stopped after the restore until its
# run_strategy starts it again.
resource "virtplane_virtual_machine_restore" "rollback" {
  name            = "db-rollback-1"
  virtual_machine = "db"
  snapshot        = "db-before-upgrade"

  target_readiness_policy = "StopTarget"

  timeouts {
    create = "30m"
  }
}

# Destroying the resource deletes only the restore record: the VM stays
# restored. To roll back again, replace it:
#   terraform apply -replace=virtplane_virtual_machine_restore.rollback
output "restored_volumes" {
  value = virtplane_virtual_machine_restore.rollback.restored_volumes # ["data"]
}
