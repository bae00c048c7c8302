package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// The virtplane_virtual_machine_snapshot resource: KubeVirt's
// VirtualMachineSnapshot. Its parts are in snapshot_*.go, as the package
// doc says; its errors, short, are here.

var (
	_ resource.Resource                = (*snapshotResource)(nil)
	_ resource.ResourceWithConfigure   = (*snapshotResource)(nil)
	_ resource.ResourceWithImportState = (*snapshotResource)(nil)
)

// NewSnapshotResource returns the virtplane_virtual_machine_snapshot resource.
func NewSnapshotResource() resource.Resource {
	return &snapshotResource{configuredResource{kind: snapshotKind}}
}

type snapshotResource struct {
	configuredResource
}

func (r *snapshotResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_snapshot"
}

func (r *snapshotResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importNamespaced(ctx, req, resp, r.kind, "default/before-upgrade")
}

// How virtplane_virtual_machine_snapshot words what goes wrong: its
// objectKind, and the attribute an agent's validation error is about.

// snapshotKind words the diagnostics about snapshots.
var snapshotKind = objectKind{noun: "virtual machine snapshot", title: "Virtual machine snapshot", one: "a snapshot",
	short: "snapshot", logKey: "snapshot", importID: "namespace/name", attribute: snapshotAttributePath}

// snapshotAttributePath maps a field of a rejected snapshot to its
// attribute.
func snapshotAttributePath(field string) (path.Path, bool) {
	switch field {
	case "metadata.name":
		return path.Root("name"), true
	case "metadata.namespace":
		return path.Root("namespace"), true
	case "spec.source":
		return path.Root("virtual_machine"), true
	case "spec.deletion_policy":
		return path.Root("deletion_policy"), true
	case "spec.failure_deadline_seconds":
		return path.Root("failure_deadline"), true
	}
	return path.Empty(), false
}
