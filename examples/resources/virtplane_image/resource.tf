# Every node downloads Debian's cloud image now; apply returns once every
# ready, schedulable node has it with this checksum, or fails with the
# node's reason (a checksum mismatch, an unreachable URL).
resource "virtplane_image" "debian" {
  name   = "debian-12.qcow2"
  url    = "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-genericcloud-amd64.qcow2"
  sha256 = "5da2a6f8e7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5" # sha256sum of the file (placeholder)
  nodes  = "all"
  # A download larger than this is stopped and nothing is kept (default:
  # the agent's --image-max-size, 10Gi).
  max_size = "2Gi"

  labels = {
    os = "debian"
  }

  timeouts {
    create = "30m"
  }
}

# Pulled on demand: a node downloads it when a VM placed there needs it,
# and that VM waits (its status shows the download's progress). A mirror
# on a private network is refused unless the servers allow its range
# (serve --image-source-cidrs 10.20.0.0/16, say).
resource "virtplane_image" "tools" {
  name   = "tools.raw"
  url    = "http://mirror.internal/images/tools.raw"
  sha256 = "0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f9"
}

# Disks name the image like any image on the node. The reference also
# makes Terraform create the image first and destroy it last: the agent
# refuses to delete an image a VM still uses.
resource "virtplane_virtual_machine" "web" {
  name   = "web"
  memory = "1Gi"

  disk {
    name       = "root"
    image      = virtplane_image.debian.name
    boot_order = 1
  }

  disk {
    name  = "tools"
    image = virtplane_image.tools.name
  }
}

output "debian_on_nodes" {
  value = [for s in virtplane_image.debian.node_status : "${s.node}: ${s.phase}"]
}
