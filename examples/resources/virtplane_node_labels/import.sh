# Adopt every admin label of a node (those set with
# `virtplane-agent node label`); the next plan removes those the
# configuration does not list.
terraform import virtplane_node_labels.node_a node-a
