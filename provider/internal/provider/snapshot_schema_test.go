package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
)

func TestSnapshotSchemasDocumentEveryAttribute(t *testing.T) {
	rs := documentedResource(t, NewSnapshotResource())
	ds := documentedDataSource(t, NewSnapshotDataSource())
	mirrorsResource(t, rs, ds)
	documentedResource(t, NewRestoreResource())

	// The spec is immutable: every argument replaces the snapshot.
	for _, name := range []string{"name", "namespace", "virtual_machine", "deletion_policy", "failure_deadline"} {
		if !requiresReplace(rs.Attributes[name].(interface {
			StringPlanModifiers() []planmodifier.String
		}).StringPlanModifiers()) {
			t.Errorf("snapshot %s does not require replacement", name)
		}
	}
}

// requiresReplace reports whether one of mods is a RequiresReplace.
func requiresReplace(mods []planmodifier.String) bool {
	for _, m := range mods {
		if strings.Contains(m.Description(context.Background()), "destroy and recreate") {
			return true
		}
	}
	return false
}
