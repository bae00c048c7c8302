# Three database VMs from one template, named db-0, db-1 and db-2. Each
# keeps its name and its own persistent volume "data" across restarts and
# template changes. Apply returns once all three are Running, ready and
# on the current template, or fails with the reason (no node fits, crash
# loop).
resource "virtplane_virtual_machine_pool" "db" {
  name     = "db"
  replicas = 3

  # A template change restarts one VM at a time.
  max_unavailable = "1"
  # Scaling in removes db-2 first, and its volume with it.
  scale_in_order = "DescendingOrder"

  virtual_machine_template {
    # Each VM's labels; selector defaults to them.
    labels = {
      app = "db"
    }

    memory = "2Gi" # "2048Mi" is the same and never shows as a change

    cpu {
      cores = 2
    }

    disk {
      name       = "root"
      image      = "debian-12.qcow2"
      boot_order = 1
    }

    # One per VM, kept on the node the VM first ran on, deleted with it.
    disk {
      name = "data"
      persistent {
        size = "20Gi"
      }
    }

    disk {
      name = "seed"
      cloud_init {
        user_data = <<-EOT
          #cloud-config
          packages: [postgresql]
        EOT
      }
    }

    # No mac_address: each VM gets its own, kept for its life.
    interface {
      name = "default"
    }

    node_failure_policy = "RestartElsewhere"
  }

  timeouts {
    create = "20m"
    update = "30m" # a rollout restarts the VMs one after another
  }
}

output "db_vms" {
  value = virtplane_virtual_machine_pool.db.status.vm_names # ["db-0", "db-1", "db-2"]
}
