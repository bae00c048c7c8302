# Terraform 1.5 and later. `terraform plan -generate-config-out=generated.tf`
# writes the resource block for you; it plans no change.
import {
  to = virtplane_virtual_machine_snapshot.before_upgrade
  id = "default/db-before-upgrade"
}
