# A web server that always runs: apply returns once it is Running and
# ready, or fails with the reason (no node fits, crash loop).
resource "virtplane_virtual_machine" "web" {
  name   = "web"
  memory = "1Gi" # "1024Mi" is the same and never shows as a change

  labels = {
    app = "web"
  }

  cpu {
    cores = 2
  }

  # Copy-on-write root disk over an image in the node image directory.
  disk {
    name       = "root"
    image      = "debian-12.qcow2"
    boot_order = 1
  }

  # Kept across restarts, deleted with the VM.
  disk {
    name = "data"
    persistent {
      size = "20Gi"
    }
  }

  # cloud-init NoCloud seed, attached as a CD-ROM.
  disk {
    name = "seed"
    cloud_init {
      user_data = <<-EOT
        #cloud-config
        hostname: web
        ssh_authorized_keys:
          - ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly web@example
      EOT
    }
  }

  interface {
    name = "default"
  }

  node_selector = {
    zone = "a"
  }

  # Move to another node on its own if this one dies (docs/failover.md).
  node_failure_policy = "RestartElsewhere"

  timeouts {
    create = "15m"
  }
}

# A batch job: runs once, is never restarted; apply returns once it runs.
resource "virtplane_virtual_machine" "migration_job" {
  name         = "schema-migration"
  run_strategy = "Once"
  memory       = "512Mi"

  boot {
    kernel  = "vmlinuz"
    initrd  = "initrd.img"
    cmdline = "console=ttyS0 quiet"
  }

  disk {
    name  = "root"
    image = "migrate.qcow2"
  }
}

# Kept defined but stopped; switch to "Always" to start it in place.
resource "virtplane_virtual_machine" "standby" {
  name         = "standby"
  namespace    = "ops"
  run_strategy = "Halted"
  memory       = "2Gi"

  # Resize without an unplanned reboot: the VM keeps running and
  # restart_required becomes true until it is restarted.
  update_policy = "none"

  disk {
    name  = "root"
    image = "debian-12.qcow2"
  }
}

output "web_node" {
  value = virtplane_virtual_machine.web.status.node
}
