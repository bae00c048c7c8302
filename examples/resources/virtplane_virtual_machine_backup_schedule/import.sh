# Import by namespace/name, or by name alone for the default namespace.
terraform import virtplane_virtual_machine_backup_schedule.db_nightly default/db-nightly
