package provider

import (
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What virtplane_role_binding and virtplane_cluster_role_binding share:
// the subjects a binding gives its role.

type subjectModel struct {
	Kind      types.String `tfsdk:"kind"`
	Name      types.String `tfsdk:"name"`
	Namespace types.String `tfsdk:"namespace"`
}

func subjectsAttribute() schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Required: true,
		MarkdownDescription: "Who gets the role: users and service accounts. Changes in place (a subject removed loses the role " +
			"at once; its open calls are checked again).",
		Validators: []validator.List{listvalidator.SizeAtLeast(1)},
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"kind": schema.StringAttribute{Required: true, MarkdownDescription: "`User` or `ServiceAccount`.",
				Validators: []validator.String{oneOf(apiv1.SubjectUser, apiv1.SubjectServiceAccount)}},
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "The user's or the service account's name."},
			"namespace": schema.StringAttribute{Optional: true,
				MarkdownDescription: "The service account's namespace (required for a `ServiceAccount`, unset for a `User`)."},
		}},
	}
}

func subjectsFromModel(in []subjectModel) []*apiv1.Subject {
	out := make([]*apiv1.Subject, len(in))
	for i, s := range in {
		out[i] = &apiv1.Subject{Kind: s.Kind.ValueString(), Name: s.Name.ValueString(), Namespace: s.Namespace.ValueString()}
	}
	return out
}

func subjectsToModel(in []*apiv1.Subject) []subjectModel {
	out := make([]subjectModel, len(in))
	for i, s := range in {
		out[i] = subjectModel{Kind: types.StringValue(s.GetKind()), Name: types.StringValue(s.GetName()), Namespace: optString(s.GetNamespace())}
	}
	return out
}
