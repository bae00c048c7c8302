package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_user resource: a person or outside system that holds
// credentials (cluster-scoped; cluster-admins manage users). Users'
// credentials are issued with `virtplane-agent auth token issue --user`
// or `auth cert issue --user`, outside Terraform, so that no person's
// secret lands in a state.

var (
	_ resource.Resource                = (*userResource)(nil)
	_ resource.ResourceWithConfigure   = (*userResource)(nil)
	_ resource.ResourceWithImportState = (*userResource)(nil)
)

var userKind = objectKind{noun: "user", title: "User", one: "a user", short: "user", logKey: "user", importID: "NAME",
	attribute: metadataAttributePath}

// NewUserResource returns the virtplane_user resource.
func NewUserResource() resource.Resource { return &userResource{configuredResource{kind: userKind}} }

type userResource struct {
	configuredResource
}

type userModel struct {
	ID          types.String `tfsdk:"id"`
	Name        types.String `tfsdk:"name"`
	Description types.String `tfsdk:"description"`
	Disabled    types.Bool   `tfsdk:"disabled"`
	UID         types.String `tfsdk:"uid"`
}

func (r *userResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_user"
}

func (r *userResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "A user (docs/security.md): a person or outside system that holds credentials, managed by " +
			"cluster-admins. It has no role until a `virtplane_role_binding` or `virtplane_cluster_role_binding` gives it one. " +
			"Its tokens and client certificates are issued with `virtplane-agent auth token issue --user` and " +
			"`auth cert issue --user`, so that no person's secret is in a Terraform state. Deleting a user revokes its " +
			"credentials and removes it from every binding.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The user's name, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the user, a DNS-1123 label. Changing it replaces the user.",
				Validators: []validator.String{dnsLabelValidator()}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"description": schema.StringAttribute{Optional: true, MarkdownDescription: "Who or what the user is. Changes in place."},
			"disabled": schema.BoolAttribute{Optional: true,
				MarkdownDescription: "Refuse the user's credentials until this is false again (they are not revoked). Changes in place."},
			"uid": schema.StringAttribute{Computed: true, MarkdownDescription: "Unique ID the agent gave the user.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (r *userResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importClusterScoped(ctx, req, resp, r.kind, "alice")
}

func userFromModel(m *userModel) *apiv1.User {
	return &apiv1.User{Metadata: &apiv1.ObjectMeta{Name: m.Name.ValueString()},
		Spec: &apiv1.UserSpec{Description: m.Description.ValueString(), Disabled: m.Disabled.ValueBool()}}
}

func userToModel(u *apiv1.User, prior *userModel) userModel {
	name := u.GetMetadata().GetName()
	return userModel{ID: types.StringValue(name), Name: types.StringValue(name),
		Description: readString(u.GetSpec().GetDescription(), prior.Description),
		Disabled:    readBool(u.GetSpec().GetDisabled(), prior.Disabled), UID: types.StringValue(u.GetMetadata().GetUid())}
}

func (r *userResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan userModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a user") {
		return
	}
	want := userFromModel(&plan)
	u, err := r.data.client.Users.Create(ctx, &apiv1.CreateUserRequest{User: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create user "+want.Metadata.Name)
		return
	}
	tflog.Info(ctx, "user created", map[string]any{"user": want.Metadata.Name})
	m := userToModel(u, &plan)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *userResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state userModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	if !r.readyToRefresh(req, resp, "read user "+name) {
		return
	}
	u, err := r.data.client.Users.Get(ctx, &apiv1.GetUserRequest{Name: name})
	if !r.stillManaged(ctx, resp, name, state.UID.ValueString(), u.GetMetadata().GetUid(), err) {
		return
	}
	m := userToModel(u, &state)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *userResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state userModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a user") {
		return
	}
	want := userFromModel(&plan)
	name := want.Metadata.Name
	c := r.data.client
	u, _, err := updateCAS(ctx, "user "+name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.User, error) {
			return c.Users.Get(ctx, &apiv1.GetUserRequest{Name: name})
		},
		func(cur *apiv1.User) *apiv1.User {
			next := proto.Clone(cur).(*apiv1.User)
			next.Spec = want.Spec
			return next
		},
		func(ctx context.Context, next *apiv1.User) (*apiv1.User, error) {
			return c.Users.Update(ctx, &apiv1.UpdateUserRequest{User: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, name, r.addError) {
		return
	}
	m := userToModel(u, &plan)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *userResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state userModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a user") {
		return
	}
	name := state.Name.ValueString()
	c := r.data.client
	deleteCreated(ctx, &r.configuredResource, &resp.Diagnostics, name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.User, error) {
			return c.Users.Get(ctx, &apiv1.GetUserRequest{Name: name})
		},
		func(ctx context.Context) error {
			_, err := c.Users.Delete(ctx, &apiv1.DeleteUserRequest{Name: name})
			return err
		},
		"user deleted", "A user is deleted with its credentials and bindings; nothing else refers to it.")
}
