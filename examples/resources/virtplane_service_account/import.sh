# Import by namespace/name.
terraform import virtplane_service_account.deployer team-a/deployer
