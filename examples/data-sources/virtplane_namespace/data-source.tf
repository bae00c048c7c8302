# What team A may still create: its quota and what its objects use now.
data "virtplane_namespace" "team_a" {
  name = "team-a"
}

output "vcpus_left" {
  value = data.virtplane_namespace.team_a.quota.vcpus - data.virtplane_namespace.team_a.used.vcpus
}
