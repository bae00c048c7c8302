# A replica set managed elsewhere (another configuration, the agent CLI).
data "virtplane_virtual_machine_replica_set" "web" {
  name = "web"
}

output "web_ready" {
  value = "${data.virtplane_virtual_machine_replica_set.web.status.ready_replicas}/${data.virtplane_virtual_machine_replica_set.web.replicas}"
}

output "web_memory" {
  value = data.virtplane_virtual_machine_replica_set.web.template.memory
}
