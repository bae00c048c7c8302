package provider

import (
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
)

// The attributes agent errors about the fields the pool and the replica
// set share land on.

// replicaAttributePath maps the fields outside the template that the pool
// and the replica set share.
func replicaAttributePath(field string) (path.Path, bool) {
	norm, args := normalizeFieldPath(field)
	switch {
	case norm == "metadata.name", norm == "metadata.namespace":
		return path.Root(strings.TrimPrefix(norm, "metadata.")), true
	case norm == "spec.replicas", norm == "spec.paused", norm == "spec.max_unavailable", norm == "spec.scale_in_order":
		return path.Root(strings.TrimPrefix(norm, "spec.")), true
	case strings.HasPrefix(norm, "spec.selector"):
		if len(args) > 0 {
			return path.Root("selector").AtMapKey(args[0]), true
		}
		return path.Root("selector"), true
	}
	return path.Empty(), false
}
