# Import by namespace/name, or by name alone for the default namespace.
terraform import virtplane_virtual_machine_pool.db default/db
terraform import virtplane_virtual_machine_pool.db db
