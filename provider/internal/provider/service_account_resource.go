package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_service_account resource: an identity of one namespace
// for automation, which its namespace's admins manage. Its tokens are
// virtplane_service_account_token; its roles come from
// virtplane_role_binding.

var (
	_ resource.Resource                = (*serviceAccountResource)(nil)
	_ resource.ResourceWithConfigure   = (*serviceAccountResource)(nil)
	_ resource.ResourceWithImportState = (*serviceAccountResource)(nil)
)

var serviceAccountKind = objectKind{noun: "service account", title: "Service account", one: "a service account in that namespace",
	short: "service account", logKey: "service_account", importID: "NAMESPACE/NAME", attribute: metadataAttributePath}

// NewServiceAccountResource returns the virtplane_service_account resource.
func NewServiceAccountResource() resource.Resource {
	return &serviceAccountResource{configuredResource{kind: serviceAccountKind}}
}

type serviceAccountResource struct {
	configuredResource
}

type serviceAccountModel struct {
	ID          types.String `tfsdk:"id"`
	Namespace   types.String `tfsdk:"namespace"`
	Name        types.String `tfsdk:"name"`
	Description types.String `tfsdk:"description"`
	UID         types.String `tfsdk:"uid"`
}

func (r *serviceAccountResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_account"
}

func (r *serviceAccountResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A service account: an identity of one namespace for automation (CI, Terraform runs), managed by the " +
			"namespace's admins (docs/security.md). It has no role until a `virtplane_role_binding` gives it one, and " +
			"authenticates with tokens (`virtplane_service_account_token`) or client certificates. Deleting it revokes its credentials.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/name`, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(apiv1.DefaultNamespace),
				MarkdownDescription: "Namespace of the account, a DNS-1123 label. Default `default`. Changing it replaces the account.",
				Validators:          []validator.String{dnsLabelValidator()}, PlanModifiers: replace},
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the account, a DNS-1123 label. Changing it replaces the account.",
				Validators: []validator.String{dnsLabelValidator()}, PlanModifiers: replace},
			"description": schema.StringAttribute{Optional: true, MarkdownDescription: "What the account is for. Changes in place."},
			"uid": schema.StringAttribute{Computed: true, MarkdownDescription: "Unique ID the agent gave the account.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (r *serviceAccountResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importNamespaced(ctx, req, resp, r.kind, "team-a/deployer")
}

func serviceAccountFromModel(m *serviceAccountModel) *apiv1.ServiceAccount {
	return &apiv1.ServiceAccount{
		Metadata: &apiv1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		Spec:     &apiv1.ServiceAccountSpec{Description: m.Description.ValueString()},
	}
}

func serviceAccountToModel(sa *apiv1.ServiceAccount, prior *serviceAccountModel) serviceAccountModel {
	md := sa.GetMetadata()
	return serviceAccountModel{
		ID: types.StringValue(apiv1.Ref(md.GetNamespace(), md.GetName())), Namespace: types.StringValue(md.GetNamespace()),
		Name: types.StringValue(md.GetName()), Description: readString(sa.GetSpec().GetDescription(), prior.Description),
		UID: types.StringValue(md.GetUid()),
	}
}

func (r *serviceAccountResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan serviceAccountModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a service account") {
		return
	}
	want := serviceAccountFromModel(&plan)
	id := apiv1.Ref(want.Metadata.Namespace, want.Metadata.Name)
	sa, err := r.data.client.ServiceAccounts.Create(ctx, &apiv1.CreateServiceAccountRequest{ServiceAccount: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create service account "+id)
		return
	}
	tflog.Info(ctx, "service account created", map[string]any{"service_account": id, "uid": sa.GetMetadata().GetUid()})
	m := serviceAccountToModel(sa, &plan)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *serviceAccountResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state serviceAccountModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() {
		return
	}
	key := &apiv1.ObjectKey{Namespace: state.Namespace.ValueString(), Name: state.Name.ValueString()}
	id := apiv1.Ref(key.Namespace, key.Name)
	if !r.readyToRefresh(req, resp, "read service account "+id) {
		return
	}
	sa, err := r.data.client.ServiceAccounts.Get(ctx, &apiv1.GetServiceAccountRequest{Key: key})
	if !r.stillManaged(ctx, resp, id, state.UID.ValueString(), sa.GetMetadata().GetUid(), err) {
		return
	}
	m := serviceAccountToModel(sa, &state)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *serviceAccountResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state serviceAccountModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a service account") {
		return
	}
	want := serviceAccountFromModel(&plan)
	key := &apiv1.ObjectKey{Namespace: want.Metadata.Namespace, Name: want.Metadata.Name}
	id := apiv1.Ref(key.Namespace, key.Name)
	c := r.data.client
	sa, _, err := updateCAS(ctx, "service account "+id, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.ServiceAccount, error) {
			return c.ServiceAccounts.Get(ctx, &apiv1.GetServiceAccountRequest{Key: key})
		},
		func(cur *apiv1.ServiceAccount) *apiv1.ServiceAccount {
			next := proto.Clone(cur).(*apiv1.ServiceAccount)
			next.Spec = want.Spec
			return next
		},
		func(ctx context.Context, next *apiv1.ServiceAccount) (*apiv1.ServiceAccount, error) {
			return c.ServiceAccounts.Update(ctx, &apiv1.UpdateServiceAccountRequest{ServiceAccount: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, id, r.addError) {
		return
	}
	m := serviceAccountToModel(sa, &plan)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *serviceAccountResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state serviceAccountModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a service account") {
		return
	}
	key := &apiv1.ObjectKey{Namespace: state.Namespace.ValueString(), Name: state.Name.ValueString()}
	c := r.data.client
	deleteCreated(ctx, &r.configuredResource, &resp.Diagnostics, apiv1.Ref(key.Namespace, key.Name), state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.ServiceAccount, error) {
			return c.ServiceAccounts.Get(ctx, &apiv1.GetServiceAccountRequest{Key: key})
		},
		func(ctx context.Context) error {
			_, err := c.ServiceAccounts.Delete(ctx, &apiv1.DeleteServiceAccountRequest{Key: key})
			return err
		},
		"service account deleted", "A service account is deleted with its credentials; nothing else refers to it.")
}

// metadataAttributePath maps the metadata's field paths to the
// attributes, for kinds whose spec has no attribute of its own to point at.
func metadataAttributePath(fieldPath string) (path.Path, bool) {
	switch norm, _ := normalizeFieldPath(fieldPath); norm {
	case "metadata.name":
		return path.Root("name"), true
	case "metadata.namespace":
		return path.Root("namespace"), true
	case "spec.description":
		return path.Root("description"), true
	case "spec.role":
		return path.Root("role"), true
	}
	return path.Empty(), false
}
