# A namespace for team A, set up by a cluster-admin: what its VMs may ask
# for in all, and the host resources they may use. Writes beyond the quota
# are refused with what is used and what is allowed.
resource "virtplane_namespace" "team_a" {
  name = "team-a"

  quota {
    vcpus  = 16
    memory = "64Gi"
    vms    = 10
    images = 5
    # Persistent volumes per storage class; "" is the node's own disk.
    persistent_storage = {
      "ceph" = "500Gi"
      ""     = "100Gi"
    }
  }

  # Unset lists allow what the host policy allows; an empty list allows
  # nothing.
  allowed {
    bridges             = ["br0"]
    networks            = []
    storage_classes     = ["ceph"]
    port_forward_ranges = ["20000-20999"]
  }
}

output "team_a_vcpus_used" {
  value = virtplane_namespace.team_a.used.vcpus
}
