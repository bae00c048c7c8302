# A class an admin defined elsewhere (another configuration, the agent
# CLI's storageclass create). The data source never has the key.
data "virtplane_storage_class" "ceph" {
  name = "ceph"
}

resource "virtplane_virtual_machine" "db" {
  name   = "db"
  memory = "1Gi"

  disk {
    name = "data"
    persistent {
      size          = "10Gi"
      storage_class = data.virtplane_storage_class.ceph.name
    }
  }
}

output "ceph_pool" {
  value = data.virtplane_storage_class.ceph.rbd.pool
}
