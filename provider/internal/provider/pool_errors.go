package provider

import (
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
)

// How virtplane_virtual_machine_pool words what goes wrong: its
// objectKind, and the attribute an agent's validation error is about.

// poolKind words the diagnostics about pools.
var poolKind = objectKind{noun: "virtual machine pool", title: "Virtual machine pool", one: "a pool", short: "pool",
	logKey: "pool", importID: "namespace/name", attribute: poolAttributePath}

// poolAttributePath maps an API field path of a pool to the attribute
// that set it; the VM template's fields map as the VM resource's do, under
// virtual_machine_template.
func poolAttributePath(field string) (path.Path, bool) {
	const tmpl = "spec.virtual_machine_template"
	base := path.Root("virtual_machine_template")
	switch {
	case field == tmpl, field == tmpl+".spec", strings.HasPrefix(field, tmpl+".metadata.annotations"):
		return base, true
	case strings.HasPrefix(field, tmpl+"."):
		// The rest is a VM's: metadata.labels, spec.run_strategy, ...
		if p, ok := vmAttributePath(strings.TrimPrefix(field, tmpl+".")); ok {
			return underPath(base, p), true
		}
		return base, true
	}
	return replicaAttributePath(field)
}
