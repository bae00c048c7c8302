package provider

import "github.com/hashicorp/terraform-plugin-framework/path"

// How virtplane_virtual_machine_restore words what goes wrong: its
// objectKind, and the attribute an agent's validation error is about.

// restoreKind words the diagnostics about restores.
var restoreKind = objectKind{noun: "virtual machine restore", title: "Virtual machine restore", one: "a restore",
	short: "restore", logKey: "restore", importID: "namespace/name", attribute: restoreAttributePath}

// restoreAttributePath maps a field of a rejected restore to its attribute.
func restoreAttributePath(field string) (path.Path, bool) {
	switch field {
	case "metadata.name":
		return path.Root("name"), true
	case "metadata.namespace":
		return path.Root("namespace"), true
	case "spec.target":
		return path.Root("virtual_machine"), true
	case "spec.snapshot":
		return path.Root("snapshot"), true
	case "spec.target_readiness_policy":
		return path.Root("target_readiness_policy"), true
	}
	return path.Empty(), false
}
