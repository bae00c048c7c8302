package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What the pool and replica set resources' create, read, update and
// delete share.

// importReplicas imports a pool or replica set by namespace/name (or name
// in the default namespace); what is a noun phrase ("a virtual machine
// pool").
func importReplicas(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, what string) {
	ns, name, err := parseNamespacedID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import "+what+" by namespace/name (default/web), or by name alone for the default namespace: "+err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), namespacedID(ns, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_for_ready"), true)...)
}

// deleteReplicas deletes object id of the resource's kind with the state's
// uid as precondition (del), so that destroy never deletes an object of
// the same name someone created after ours was deleted, and waits until it
// is gone (gone, which returns nil then): its controller deletes what it
// made first, then drops its finalizer.
func (r *configuredResource) deleteReplicas(ctx context.Context, diags *diag.Diagnostics, id, uid string, timeout time.Duration,
	del func(context.Context, *apiv1.DeleteOptions) error, gone func(context.Context) error) {
	k := r.kind
	err := del(ctx, &apiv1.DeleteOptions{Uid: uid})
	switch {
	case status.Code(err) == codes.NotFound:
		return
	case status.Code(err) == codes.FailedPrecondition && uid != "":
		diags.AddWarning(k.title+" "+id+" was replaced outside Terraform",
			"The "+k.short+" Terraform created is already gone; the "+k.short+" now named "+id+
				" was created by someone else and was left alone.")
		return
	case err != nil:
		r.addError(diags, err, "delete "+k.noun+" "+id)
		return
	}
	tflog.Info(ctx, k.noun+" deletion requested", map[string]any{k.logKey: id})
	err = gone(ctx)
	switch {
	case errors.Is(err, errWaitTimeout):
		diags.AddError("Timed out deleting "+k.noun+" "+id,
			fmt.Sprintf("The %s was still there after %s: %s. Its controller deletes its replicas first, each guest "+
				"getting termination_grace_period seconds to shut down, and a node that stopped answering holds its "+
				"instances until it is fenced (docs/failover.md). Raise timeouts.delete, or lower "+
				"termination_grace_period.", k.short, timeout, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": ")))
	case err != nil:
		r.addError(diags, err, "wait for "+k.noun+" "+id+" to be deleted")
	}
}
