# A pool of an existing Ceph cluster. The cephx user needs
# mon 'profile rbd' and osd 'profile rbd pool=vms'; its key is read from a
# file (`ceph auth get-key client.virtplane > virtplane.key`), kept in the
# state as a sensitive value and never shown in plans.
resource "virtplane_storage_class" "ceph" {
  name = "ceph"

  rbd {
    monitors = ["10.0.0.1:3300", "10.0.0.2:3300", "10.0.0.3:3300"]
    pool     = "vms"
    user     = "virtplane"
    key      = file("${path.module}/virtplane.key")
  }

  # Only the nodes an admin labelled reach the cluster.
  node_selector = {
    "example.com/ceph" = "true"
  }
}

# A filesystem the operator mounts at /mnt/vms on every node it selects
# (NFS, CephFS): volumes are qcow2 files under /mnt/vms/virtplane.
resource "virtplane_storage_class" "nfs" {
  name = "nfs"

  shared_filesystem {
    path = "/mnt/vms"
  }
}

# A persistent disk on the Ceph pool: the VM is no longer pinned to the
# node that made it. The reference makes Terraform create the class first
# and destroy it last (the agent refuses to delete a class a VM uses). A
# disk's class cannot change: rename the disk to get a new volume.
resource "virtplane_virtual_machine" "db" {
  name   = "db"
  memory = "2Gi"

  disk {
    name       = "root"
    image      = "debian-12.qcow2"
    boot_order = 1
  }

  disk {
    name = "data"
    persistent {
      size          = "20Gi"
      storage_class = virtplane_storage_class.ceph.name
    }
  }
}
