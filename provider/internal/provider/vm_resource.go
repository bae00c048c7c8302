package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
)

// The virtplane_virtual_machine resource, one concern per file: this file
// has the type and what the framework asks of every resource; vm_schema.go
// the schema; vm_validate.go the checks across attributes; vm_plan_modifiers.go
// what plan says and changes; vm_restart.go the decision whether a change
// restarts a running VM; vm_crud.go create, read, update and delete.

var (
	_ resource.Resource                   = (*vmResource)(nil)
	_ resource.ResourceWithConfigure      = (*vmResource)(nil)
	_ resource.ResourceWithImportState    = (*vmResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*vmResource)(nil)
	_ resource.ResourceWithValidateConfig = (*vmResource)(nil)
)

// defaultTimeout applies to create, update and delete when the timeouts
// block does not say otherwise. Long enough for a real guest to boot from
// a cold image cache; waits end early when the VM cannot get there.
const defaultTimeout = 10 * time.Minute

// maxConflictRetries bounds compare-and-swap retries of one update: the VM
// controller writes status concurrently, which conflicts with our writes.
const maxConflictRetries = 20

// NewVMResource returns the virtplane_virtual_machine resource.
func NewVMResource() resource.Resource { return &vmResource{configuredResource{kind: vmKind}} }

type vmResource struct {
	configuredResource
}

func (r *vmResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine"
}

func (r *vmResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, err := parseNamespacedID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import a virtual machine by namespace/name (default/web), or by name alone for the default namespace: "+err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), namespacedID(ns, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("update_policy"), defaultUpdatePolicy)...)
}

// addWaitError explains why a wait for t ended without the target state.
func (r *vmResource) addWaitError(diags *diag.Diagnostics, err error, id string, t waitTarget, timeout time.Duration, op string) {
	r.addWaitFailure(diags, err, id, waitFailure{
		want: targetDescription(t), slow: "the guest needs", stuck: "cannot reach its run strategy's state",
	}, timeout, op)
}
