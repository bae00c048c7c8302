# An image managed elsewhere (another configuration, the agent CLI's
# image create).
data "virtplane_image" "debian" {
  name = "debian-12.qcow2"
}

output "debian_sha256" {
  value = data.virtplane_image.debian.sha256
}

# Fail the plan early when a node could not pull it.
check "debian_pulled" {
  assert {
    condition     = alltrue([for s in data.virtplane_image.debian.node_status : s.phase != "Failed"])
    error_message = "debian-12.qcow2 failed to pull on: ${join(", ", [for s in data.virtplane_image.debian.node_status : s.node if s.phase == "Failed"])}."
  }
}
