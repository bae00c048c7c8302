# Import by name; cluster role bindings have no namespace.
terraform import virtplane_cluster_role_binding.ops ops-cluster-admin
