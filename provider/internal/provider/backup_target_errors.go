package provider

import (
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
)

// How virtplane_backup_target words what goes wrong.

var backupTargetKind = objectKind{noun: "backup target", title: "Backup target", one: "a backup target", short: "backup target",
	logKey: "backup_target", importID: "NAME", attribute: backupTargetAttributePath}

// backupTargetAttributePath maps the API's field paths of a BackupTarget
// to the attributes.
func backupTargetAttributePath(fieldPath string) (path.Path, bool) {
	norm, args := normalizeFieldPath(fieldPath)
	switch {
	case norm == "metadata.name":
		return path.Root("name"), true
	case norm == "spec.node_selector[*]":
		return path.Root("node_selector").AtMapKey(args[0]), true
	case norm == "spec.node_selector":
		return path.Root("node_selector"), true
	case strings.HasPrefix(norm, "spec.directory."), strings.HasPrefix(norm, "spec.s3."):
		block, attr, _ := strings.Cut(strings.TrimPrefix(norm, "spec."), ".")
		attr, _, _ = strings.Cut(attr, ".")
		return path.Root(block).AtName(attr), true
	}
	return path.Empty(), false
}
