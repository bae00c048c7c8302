# Nightly backups of the VM db to the S3 target, keeping the last 7, one a
# day for two weeks and one a week for two months. Destroying the schedule
# keeps its backups; `virtplane-agent backup list --target s3` lists them
# and `backup restore ID --target s3 --to NEWVM` restores one into a new VM.
resource "virtplane_virtual_machine_backup_schedule" "db_nightly" {
  name            = "db-nightly"
  virtual_machine = virtplane_virtual_machine.db.name
  target          = virtplane_backup_target.s3.name
  schedule        = "0 3 * * *"

  retention {
    keep_last   = 7
    keep_daily  = 14
    keep_weekly = 8
  }
}
