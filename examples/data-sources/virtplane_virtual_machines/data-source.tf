# Every VM of the web tier, whatever its state.
data "virtplane_virtual_machines" "web" {
  label_selector = "app=web"
}

# VMs that keep failing to start, in any namespace.
data "virtplane_virtual_machines" "crashing" {
  printable_status = "CrashLoopBackOff"
}

output "web_nodes" {
  value = { for vm in data.virtplane_virtual_machines.web.virtual_machines : vm.id => vm.node }
}

# An inventory: each running web VM's first address.
output "web_ips" {
  value = {
    for vm in data.virtplane_virtual_machines.web.virtual_machines : vm.id => try(vm.interfaces[0].ip_address, null)
  }
}

output "crashing" {
  value = [for vm in data.virtplane_virtual_machines.crashing.virtual_machines : vm.id]
}
