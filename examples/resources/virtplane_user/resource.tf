# A person who holds credentials. Her tokens and certificates are issued
# outside Terraform (virtplane-agent auth token issue --user alice), so
# that no person's secret is in a state.
resource "virtplane_user" "alice" {
  name        = "alice"
  description = "Alice Example, team A lead"
}

# Alice administers team A's namespace.
resource "virtplane_role_binding" "alice_admin" {
  namespace = "team-a"
  name      = "alice-admin"
  role      = "admin"
  subjects  = [{ kind = "User", name = virtplane_user.alice.name }]
}
