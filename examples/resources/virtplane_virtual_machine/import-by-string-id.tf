# Terraform 1.5 and later. `terraform plan -generate-config-out=generated.tf`
# writes the resource block for you; it plans no change (user_data, being
# sensitive, is written as null, which keeps the current value).
import {
  to = virtplane_virtual_machine.web
  id = "default/web"
}
