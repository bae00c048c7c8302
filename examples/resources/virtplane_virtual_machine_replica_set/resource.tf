# Five interchangeable web servers: instances with no VM, named
# web-<5 random characters>. One that fails is replaced by a new one.
# Apply returns once all five are ready, or fails with the reason.
resource "virtplane_virtual_machine_replica_set" "web" {
  name     = "web"
  replicas = 5

  template {
    # Each instance's labels; selector defaults to them.
    labels = {
      app = "web"
    }

    memory = "512Mi"

    boot {
      kernel  = "vmlinuz"
      initrd  = "initrd.img"
      cmdline = "console=ttyS0 quiet"
    }

    # Copy-on-write over the image, thrown away with the instance. A
    # replica set takes no persistent disks: see
    # virtplane_virtual_machine_pool.
    disk {
      name  = "root"
      image = "web.qcow2"
    }

    interface {
      name = "default"
      # Port 8080 of the node each instance runs on: a host port is held
      # by one instance, so one replica runs per node (5 need 5 nodes).
      port_forward {
        host_port  = 8080
        guest_port = 80
      }
    }
  }
}

output "web_instances" {
  value = virtplane_virtual_machine_replica_set.web.status.instance_names
}
