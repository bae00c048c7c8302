# Adopt the cordon of a node cordoned with `virtplane-agent node cordon`.
terraform import virtplane_node_maintenance.node_b node-b
