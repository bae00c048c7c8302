# On an agent host: the local unix socket needs no token or TLS settings.
provider "virtplane" {}

# From another machine: the agent's TLS listener (virtplane-agent serve
# --listen 0.0.0.0:7443), trusting the CA and using the token it generated
# in <data-dir>/pki/.
provider "virtplane" {
  alias      = "remote"
  endpoint   = "agent1.example.com:7443"
  ca_file    = "${path.module}/pki/ca.crt"
  token_file = pathexpand("~/.config/virtplane/token")
}
