# The CI pipeline may manage VMs, pools, snapshots, backups, migrations
# and consoles in team-a, and nothing elsewhere.
resource "virtplane_role_binding" "deployer_edit" {
  namespace = "team-a"
  name      = "deployer-edit"
  role      = "edit"
  subjects = [
    { kind = "ServiceAccount", namespace = "team-a", name = "deployer" },
  ]
}
