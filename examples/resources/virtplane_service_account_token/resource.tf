resource "virtplane_service_account" "deployer" {
  namespace = "team-a"
  name      = "deployer"
}

# A token of the account, valid 30 days. It is shown only when issued and
# kept in the state (sensitive): protect the state as the token. Changing
# anything issues a new token; destroying revokes it.
resource "virtplane_service_account_token" "deployer" {
  namespace       = virtplane_service_account.deployer.namespace
  service_account = virtplane_service_account.deployer.name
  ttl             = "720h"
  description     = "CI pipeline"
}

# Hand it to the pipeline, e.g. as a CI secret.
output "deployer_token" {
  value     = virtplane_service_account_token.deployer.token
  sensitive = true
}
