# Import by namespace/name, or by name alone for the default namespace.
terraform import virtplane_virtual_machine.web default/web
terraform import virtplane_virtual_machine.web web
