# Import by the target's name; targets have no namespace. No read returns
# the secret key, so the state has none until the next apply writes the
# configured one (planned as an in-place update).
terraform import virtplane_backup_target.s3 s3
