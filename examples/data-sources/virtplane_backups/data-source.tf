# What the S3 target holds, newest first: also backups another cluster
# wrote to the same bucket prefix. Restore one with
# `virtplane-agent backup restore <id> --target s3 --to db-copy`.
data "virtplane_backups" "db" {
  target          = "s3"
  virtual_machine = "db"
}

output "newest_db_backup" {
  value = try(data.virtplane_backups.db.backups[0].id, null)
}
