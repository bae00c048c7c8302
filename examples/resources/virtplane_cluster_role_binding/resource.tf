# An operator who may do everything, as the bootstrap admin token.
resource "virtplane_cluster_role_binding" "ops" {
  name     = "ops-cluster-admin"
  role     = "cluster-admin"
  subjects = [{ kind = "User", name = "bob" }]
}

# An auditor who reads every namespace.
resource "virtplane_cluster_role_binding" "auditor" {
  name     = "auditor-view"
  role     = "view"
  subjects = [{ kind = "User", name = "carol" }]
}
