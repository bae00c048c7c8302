# The migrations of one VM (started with `virtplane-agent migrate web`).
data "virtplane_migrations" "web" {
  vm = "web"
}

# Migrations still looking for a target node, with the reason.
data "virtplane_migrations" "stuck" {
  namespace = "prod"
  phase     = "Scheduling"
}

output "web_last_migration" {
  value = try(data.virtplane_migrations.web.migrations[length(data.virtplane_migrations.web.migrations) - 1], null)
}

output "stuck" {
  value = { for m in data.virtplane_migrations.stuck.migrations : m.vm => m.message }
}
