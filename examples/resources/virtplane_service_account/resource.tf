# The identity team A's CI pipeline runs Terraform as.
resource "virtplane_service_account" "deployer" {
  namespace   = "team-a"
  name        = "deployer"
  description = "CI pipeline of team A"
}
