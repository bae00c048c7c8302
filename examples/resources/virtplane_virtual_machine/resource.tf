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

  # User-mode NAT; the node forwards its port 2222 to the guest's SSH.
  interface {
    name = "default"
    port_forward {
      host_port  = 2222
      guest_port = 22
      # host_address = "127.0.0.1" (default: reachable from the node only;
      # others only where the server's --port-forward-addresses lists them)
    }
  }

  # On the LAN through the node's bridge br0, VLAN 20; the VM is placed
  # only on nodes that have br0 (data source virtplane_nodes, bridges).
  # The server must allow it: serve --allowed-bridges br0.
  interface {
    name = "lan"
    bridge {
      name = "br0"
      vlan = 20
    }
  }

  # Apply returns once the guest has an address on the LAN, so that the
  # output below has it.
  wait_for_ip {
    interface = "lan"
    timeout   = "3m"
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

  # A node drain moves the job live to another node: shut down, a Once
  # VM would not run again. While it cannot migrate it holds the drain.
  eviction_strategy = "LiveMigrate"

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

# A VM on libvirt's NAT network "default", where the DHCP lease names its
# address; the server must allow it: serve --allowed-networks default.
resource "virtplane_virtual_machine" "builder" {
  name   = "builder"
  memory = "1Gi"

  disk {
    name  = "root"
    image = "debian-12.qcow2"
  }

  interface {
    name = "default"
    network {
      name = "default"
    }
  }

  wait_for_ip {} # the first interface, at most 5 minutes
}

output "web_node" {
  value = virtplane_virtual_machine.web.status.node
}

output "web_lan_ip" {
  value = one([for i in virtplane_virtual_machine.web.status.interfaces : i.ip_address if i.name == "lan"])
}

output "builder_ip" {
  value = virtplane_virtual_machine.builder.status.interfaces[0].ip_address
}
