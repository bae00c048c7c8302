# Import by namespace/name, or by name alone for the default namespace.
terraform import virtplane_virtual_machine_replica_set.web default/web
terraform import virtplane_virtual_machine_replica_set.web web
