# A VM managed elsewhere (another configuration, the agent CLI).
data "virtplane_virtual_machine" "db" {
  namespace = "prod"
  name      = "db"
}

output "db_node" {
  value = data.virtplane_virtual_machine.db.status.node
}

# Its addresses, as its node found them (null while it has none).
output "db_ips" {
  value = { for i in data.virtplane_virtual_machine.db.status.interfaces : i.name => i.ip_address }
}

# Fail the plan early when the database is not up.
check "db_running" {
  assert {
    condition     = data.virtplane_virtual_machine.db.status.printable_status == "Running"
    error_message = "prod/db is ${data.virtplane_virtual_machine.db.status.printable_status}, not Running."
  }
}
