# A snapshot of the database VM before an upgrade. Apply returns once the
# copy of its persistent volumes is complete; the guest keeps running (its
# file systems are frozen for a moment when a guest agent answers).
resource "virtplane_virtual_machine_snapshot" "before_upgrade" {
  name            = "db-before-upgrade"
  virtual_machine = virtplane_virtual_machine.db.name

  # Keep the data when this snapshot is destroyed (default "Delete").
  deletion_policy = "Retain"
  # Fail the snapshot if the copy takes longer (default "5m").
  failure_deadline = "15m"

  timeouts {
    create = "20m"
  }
}

# A second VM whose persistent volumes start as copies of the snapshot's:
# it runs on the snapshot's node, with MAC addresses of its own.
resource "virtplane_virtual_machine" "db_test" {
  name            = "db-test"
  source_snapshot = virtplane_virtual_machine_snapshot.before_upgrade.name

  memory = "2Gi"

  disk {
    name       = "root"
    image      = "debian-12.qcow2"
    boot_order = 1
  }

  # The snapshot's volume "data", copied.
  disk {
    name = "data"
    persistent {
      size = "20Gi"
    }
  }

  interface {
    name = "default"
  }
}

output "snapshot_volumes" {
  value = virtplane_virtual_machine_snapshot.before_upgrade.included_volumes # ["data"]
}
