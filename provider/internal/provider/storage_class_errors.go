package provider

import (
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
)

// How virtplane_storage_class words what goes wrong: its objectKind and
// the attribute an agent's validation error is about.

// storageClassKind words the diagnostics about storage classes.
var storageClassKind = objectKind{noun: "storage class", title: "Storage class", one: "a storage class", short: "storage class",
	logKey: "storage_class", importID: "NAME", attribute: storageClassAttributePath}

// storageClassAttributePath maps the API's field paths of a StorageClass
// ("spec.rbd.monitors[1]") to the attributes (rbd.monitors[1]). "spec"
// alone (neither or both kinds) is about the resource as a whole.
func storageClassAttributePath(fieldPath string) (path.Path, bool) {
	norm, args := normalizeFieldPath(fieldPath)
	switch {
	case norm == "metadata.name":
		return path.Root("name"), true
	case norm == "spec.node_selector[*]":
		return path.Root("node_selector").AtMapKey(args[0]), true
	case norm == "spec.node_selector":
		return path.Root("node_selector"), true
	case norm == "spec.rbd.monitors[*]":
		if i, err := strconv.Atoi(args[0]); err == nil {
			return path.Root("rbd").AtName("monitors").AtListIndex(i), true
		}
		return path.Root("rbd").AtName("monitors"), true
	case strings.HasPrefix(norm, "spec.rbd."), strings.HasPrefix(norm, "spec.shared_filesystem."):
		block, attr, _ := strings.Cut(strings.TrimPrefix(norm, "spec."), ".")
		attr, _, _ = strings.Cut(attr, ".")
		attr, _, _ = strings.Cut(attr, "[")
		return path.Root(block).AtName(attr), true
	case norm == "spec.rbd", norm == "spec.shared_filesystem":
		return path.Root(strings.TrimPrefix(norm, "spec.")), true
	}
	return path.Empty(), false
}
