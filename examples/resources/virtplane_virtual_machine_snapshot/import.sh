# Import by namespace/name, or by name alone for the default namespace.
terraform import virtplane_virtual_machine_snapshot.before_upgrade default/db-before-upgrade
terraform import virtplane_virtual_machine_snapshot.before_upgrade db-before-upgrade
