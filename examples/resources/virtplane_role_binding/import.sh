# Import by namespace/name.
terraform import virtplane_role_binding.deployer_edit team-a/deployer-edit
