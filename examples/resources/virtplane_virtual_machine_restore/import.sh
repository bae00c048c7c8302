# Import by namespace/name, or by name alone for the default namespace.
terraform import virtplane_virtual_machine_restore.rollback default/db-rollback-1
