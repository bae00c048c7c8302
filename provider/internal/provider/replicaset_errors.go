package provider

import (
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
)

// How virtplane_virtual_machine_replica_set words what goes wrong: its
// objectKind, and the attribute an agent's validation error is about.

// replicaSetKind words the diagnostics about replica sets.
var replicaSetKind = objectKind{noun: "replica set", title: "Replica set", one: "a replica set", short: "replica set",
	logKey: "replica_set", importID: "namespace/name", attribute: replicaSetAttributePath}

// replicaSetAttributePath maps an API field path of a replica set to the
// attribute that set it; the template's spec maps as the VM resource's
// does, under template.
func replicaSetAttributePath(field string) (path.Path, bool) {
	const tmpl = "spec.template"
	base := path.Root("template")
	norm, args := normalizeFieldPath(field)
	switch {
	case strings.HasPrefix(norm, tmpl+".metadata.labels"):
		if len(args) > 0 {
			return base.AtName("labels").AtMapKey(args[0]), true
		}
		return base.AtName("labels"), true
	case strings.HasPrefix(field, tmpl+"."):
		// spec.template.metadata.annotations and spec.template.spec...
		// are a VM's fields of the same names.
		if p, ok := vmAttributePath(field); ok {
			return underPath(base, p), true
		}
		return base, true
	case field == tmpl:
		return base, true
	}
	return replicaAttributePath(field)
}
