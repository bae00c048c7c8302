package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// deleteCreated deletes the cluster-scoped object named name that
// Terraform created (stateUID): an image, a storage class, a backup
// target. Their API's delete takes no uid precondition, so the object is
// read first, and one someone created under the same name after ours was
// deleted is left alone, with a warning. A refusal because the object is
// still in use (FailedPrecondition) is an error with the agent's reason
// and then advice, which says how to order the destroy; deleted is the
// log line of a success.
func deleteCreated[T metaObject](ctx context.Context, r *configuredResource, diags *diag.Diagnostics, name, stateUID string,
	get func(context.Context) (T, error), del func(context.Context) error, deleted, advice string,
) {
	k := r.kind
	cur, err := get(ctx)
	switch {
	case status.Code(err) == codes.NotFound:
		return
	case err != nil:
		r.addError(diags, err, "read "+k.noun+" "+name+" before deleting it")
		return
	case stateUID != "" && cur.GetMetadata().GetUid() != stateUID:
		diags.AddWarning(k.title+" "+name+" was replaced outside Terraform",
			"The "+k.short+" Terraform created is already gone; the "+k.short+" now named "+name+
				" was created by someone else and was left alone.")
		return
	}
	err = del(ctx)
	switch {
	case err == nil, status.Code(err) == codes.NotFound:
		tflog.Info(ctx, deleted, map[string]any{k.logKey: name})
	case status.Code(err) == codes.FailedPrecondition:
		diags.AddError(k.title+" "+name+" is in use", fmt.Sprintf("Cannot delete %s %s: %s.\n\n%s",
			k.noun, name, strings.TrimSuffix(status.Convert(err).Message(), "."), advice))
	default:
		r.addError(diags, err, "delete "+k.noun+" "+name)
	}
}
