# Import by the namespace's name: a namespace made by a first write in it
# (it has no quota yet) is imported, then given one.
terraform import virtplane_namespace.team_a team-a
