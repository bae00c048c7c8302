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

// The virtplane_cluster_role_binding resource: subjects get a role
// everywhere: cluster-admin (every method), or admin, edit, view in every
// namespace. Cluster-admins manage them.

var (
	_ resource.Resource                = (*clusterRoleBindingResource)(nil)
	_ resource.ResourceWithConfigure   = (*clusterRoleBindingResource)(nil)
	_ resource.ResourceWithImportState = (*clusterRoleBindingResource)(nil)
)

var clusterRoleBindingKind = objectKind{noun: "cluster role binding", title: "Cluster role binding", one: "a cluster role binding",
	short: "cluster role binding", logKey: "cluster_role_binding", importID: "NAME", attribute: metadataAttributePath}

// NewClusterRoleBindingResource returns the virtplane_role_binding resource.
func NewClusterRoleBindingResource() resource.Resource {
	return &clusterRoleBindingResource{configuredResource{kind: clusterRoleBindingKind}}
}

type clusterRoleBindingResource struct {
	configuredResource
}

type clusterRoleBindingModel struct {
	ID       types.String   `tfsdk:"id"`
	Name     types.String   `tfsdk:"name"`
	Role     types.String   `tfsdk:"role"`
	Subjects []subjectModel `tfsdk:"subjects"`
	UID      types.String   `tfsdk:"uid"`
}

func (r *clusterRoleBindingResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster_role_binding"
}

func (r *clusterRoleBindingResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A cluster role binding (docs/security.md): its subjects get `role` everywhere: `cluster-admin` " +
			"may call every method (as the bootstrap admin token); `admin`, `edit` and `view` hold in every namespace " +
			"(a `view` cluster role binding also reads the cluster-wide kinds). Cluster-admins manage them.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The binding's name, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the binding, a DNS-1123 label. Changing it replaces the binding.",
				Validators: []validator.String{dnsLabelValidator()}, PlanModifiers: replace},
			"role": schema.StringAttribute{Required: true, MarkdownDescription: "`cluster-admin`, `admin`, `edit` or `view`. Changes in place.",
				Validators: []validator.String{oneOf(apiv1.RoleClusterAdmin, apiv1.RoleAdmin, apiv1.RoleEdit, apiv1.RoleView)}},
			"subjects": subjectsAttribute(),
			"uid": schema.StringAttribute{Computed: true, MarkdownDescription: "Unique ID the agent gave the binding.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (r *clusterRoleBindingResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importClusterScoped(ctx, req, resp, r.kind, "alice-admin")
}

func clusterRoleBindingFromModel(m *clusterRoleBindingModel) *apiv1.ClusterRoleBinding {
	return &apiv1.ClusterRoleBinding{
		Metadata: &apiv1.ObjectMeta{Name: m.Name.ValueString()},
		Spec:     &apiv1.RoleBindingSpec{Role: m.Role.ValueString(), Subjects: subjectsFromModel(m.Subjects)},
	}
}

func clusterRoleBindingToModel(b *apiv1.ClusterRoleBinding) clusterRoleBindingModel {
	md := b.GetMetadata()
	return clusterRoleBindingModel{
		ID: types.StringValue(md.GetName()), Name: types.StringValue(md.GetName()), Role: types.StringValue(b.GetSpec().GetRole()),
		Subjects: subjectsToModel(b.GetSpec().GetSubjects()), UID: types.StringValue(md.GetUid()),
	}
}

func (r *clusterRoleBindingResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan clusterRoleBindingModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a cluster role binding") {
		return
	}
	want := clusterRoleBindingFromModel(&plan)
	id := want.Metadata.Name
	b, err := r.data.client.ClusterRoleBindings.Create(ctx, &apiv1.CreateClusterRoleBindingRequest{ClusterRoleBinding: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create cluster role binding "+id)
		return
	}
	tflog.Info(ctx, "cluster role binding created", map[string]any{"cluster_role_binding": id, "role": want.Spec.Role})
	m := clusterRoleBindingToModel(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *clusterRoleBindingResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state clusterRoleBindingModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() {
		return
	}
	id := state.Name.ValueString()
	if !r.readyToRefresh(req, resp, "read cluster role binding "+id) {
		return
	}
	b, err := r.data.client.ClusterRoleBindings.Get(ctx, &apiv1.GetClusterRoleBindingRequest{Name: id})
	if !r.stillManaged(ctx, resp, id, state.UID.ValueString(), b.GetMetadata().GetUid(), err) {
		return
	}
	m := clusterRoleBindingToModel(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *clusterRoleBindingResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state clusterRoleBindingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a cluster role binding") {
		return
	}
	want := clusterRoleBindingFromModel(&plan)
	id := want.Metadata.Name
	c := r.data.client
	b, _, err := updateCAS(ctx, "cluster role binding "+id, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.ClusterRoleBinding, error) {
			return c.ClusterRoleBindings.Get(ctx, &apiv1.GetClusterRoleBindingRequest{Name: id})
		},
		func(cur *apiv1.ClusterRoleBinding) *apiv1.ClusterRoleBinding {
			next := proto.Clone(cur).(*apiv1.ClusterRoleBinding)
			next.Spec = want.Spec
			return next
		},
		func(ctx context.Context, next *apiv1.ClusterRoleBinding) (*apiv1.ClusterRoleBinding, error) {
			return c.ClusterRoleBindings.Update(ctx, &apiv1.UpdateClusterRoleBindingRequest{ClusterRoleBinding: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, id, r.addError) {
		return
	}
	m := clusterRoleBindingToModel(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *clusterRoleBindingResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state clusterRoleBindingModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a cluster role binding") {
		return
	}
	name := state.Name.ValueString()
	c := r.data.client
	deleteCreated(ctx, &r.configuredResource, &resp.Diagnostics, name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.ClusterRoleBinding, error) {
			return c.ClusterRoleBindings.Get(ctx, &apiv1.GetClusterRoleBindingRequest{Name: name})
		},
		func(ctx context.Context) error {
			_, err := c.ClusterRoleBindings.Delete(ctx, &apiv1.DeleteClusterRoleBindingRequest{Name: name})
			return err
		},
		"cluster role binding deleted", "A role binding is never in use; this refusal is the agent's.")
}
