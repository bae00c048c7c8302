# An S3 bucket prefix (any S3-compatible service: AWS, Ceph's radosgw,
# MinIO). The secret key is kept in the state as a sensitive value, never
# shown in plans, and handed by the agent only to the nodes that upload or
# restore a backup.
resource "virtplane_backup_target" "s3" {
  name = "s3"

  s3 {
    endpoint   = "https://s3.example.com"
    bucket     = "vm-backups"
    prefix     = "cluster-a"
    access_key = "AKIAEXAMPLE"
    secret_key = file("${path.module}/s3-secret.key")
  }
}

# A directory mounted at /mnt/backups (NFS) on the servers and on every
# node the target selects.
resource "virtplane_backup_target" "nfs" {
  name = "nfs"

  directory {
    path = "/mnt/backups"
  }

  node_selector = {
    "example.com/backup-network" = "true"
  }
}
