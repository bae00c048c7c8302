# Import by namespace/name, or by name alone for the default namespace.
terraform import virtplane_virtual_machine.web default/web
terraform import virtplane_virtual_machine.web web

# Adopt libvirt domain legacy-web of node node-a (defined outside virtplane):
# as VM default/legacy-web, or as VM prod/web.
terraform import virtplane_virtual_machine.web adopt:node-a/legacy-web
terraform import virtplane_virtual_machine.web adopt:node-a/legacy-web/prod/web
