package provider

import (
	"context"

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

// The virtplane_role_binding resource: subjects get a role (admin, edit,
// view) in the binding's namespace. The namespace's admins manage them.

var (
	_ resource.Resource                = (*roleBindingResource)(nil)
	_ resource.ResourceWithConfigure   = (*roleBindingResource)(nil)
	_ resource.ResourceWithImportState = (*roleBindingResource)(nil)
)

var roleBindingKind = objectKind{noun: "role binding", title: "Role binding", one: "a role binding in that namespace",
	short: "role binding", logKey: "role_binding", importID: "NAMESPACE/NAME", attribute: metadataAttributePath}

// NewRoleBindingResource returns the virtplane_role_binding resource.
func NewRoleBindingResource() resource.Resource {
	return &roleBindingResource{configuredResource{kind: roleBindingKind}}
}

type roleBindingResource struct {
	configuredResource
}

type roleBindingModel struct {
	ID        types.String   `tfsdk:"id"`
	Namespace types.String   `tfsdk:"namespace"`
	Name      types.String   `tfsdk:"name"`
	Role      types.String   `tfsdk:"role"`
	Subjects  []subjectModel `tfsdk:"subjects"`
	UID       types.String   `tfsdk:"uid"`
}

func (r *roleBindingResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_role_binding"
}

func (r *roleBindingResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A role binding (docs/security.md): its subjects get `role` in its namespace. `view` reads; `edit` " +
			"manages VMs, pools, snapshots, backups, migrations and consoles; `admin` also the namespace's service accounts, " +
			"their tokens and its role bindings. The namespace's admins (and cluster-admins) manage bindings.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/name`, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(apiv1.DefaultNamespace),
				MarkdownDescription: "The namespace the role holds in, a DNS-1123 label. Default `default`. Changing it replaces the binding.",
				Validators:          []validator.String{dnsLabelValidator()}, PlanModifiers: replace},
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the binding, a DNS-1123 label. Changing it replaces the binding.",
				Validators: []validator.String{dnsLabelValidator()}, PlanModifiers: replace},
			"role": schema.StringAttribute{Required: true, MarkdownDescription: "`admin`, `edit` or `view`. Changes in place.",
				Validators: []validator.String{oneOf(apiv1.RoleAdmin, apiv1.RoleEdit, apiv1.RoleView)}},
			"subjects": subjectsAttribute(),
			"uid": schema.StringAttribute{Computed: true, MarkdownDescription: "Unique ID the agent gave the binding.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		},
	}
}

func (r *roleBindingResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importNamespaced(ctx, req, resp, r.kind, "team-a/deployer-edit")
}

func roleBindingFromModel(m *roleBindingModel) *apiv1.RoleBinding {
	return &apiv1.RoleBinding{
		Metadata: &apiv1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		Spec:     &apiv1.RoleBindingSpec{Role: m.Role.ValueString(), Subjects: subjectsFromModel(m.Subjects)},
	}
}

func roleBindingToModel(b *apiv1.RoleBinding) roleBindingModel {
	md := b.GetMetadata()
	return roleBindingModel{
		ID: types.StringValue(apiv1.Ref(md.GetNamespace(), md.GetName())), Namespace: types.StringValue(md.GetNamespace()),
		Name: types.StringValue(md.GetName()), Role: types.StringValue(b.GetSpec().GetRole()),
		Subjects: subjectsToModel(b.GetSpec().GetSubjects()), UID: types.StringValue(md.GetUid()),
	}
}

func (r *roleBindingResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan roleBindingModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a role binding") {
		return
	}
	want := roleBindingFromModel(&plan)
	id := apiv1.Ref(want.Metadata.Namespace, want.Metadata.Name)
	b, err := r.data.client.RoleBindings.Create(ctx, &apiv1.CreateRoleBindingRequest{RoleBinding: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create role binding "+id)
		return
	}
	tflog.Info(ctx, "role binding created", map[string]any{"role_binding": id, "role": want.Spec.Role})
	m := roleBindingToModel(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *roleBindingResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state roleBindingModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() {
		return
	}
	key := &apiv1.ObjectKey{Namespace: state.Namespace.ValueString(), Name: state.Name.ValueString()}
	id := apiv1.Ref(key.Namespace, key.Name)
	if !r.readyToRefresh(req, resp, "read role binding "+id) {
		return
	}
	b, err := r.data.client.RoleBindings.Get(ctx, &apiv1.GetRoleBindingRequest{Key: key})
	if !r.stillManaged(ctx, resp, id, state.UID.ValueString(), b.GetMetadata().GetUid(), err) {
		return
	}
	m := roleBindingToModel(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *roleBindingResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state roleBindingModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a role binding") {
		return
	}
	want := roleBindingFromModel(&plan)
	key := &apiv1.ObjectKey{Namespace: want.Metadata.Namespace, Name: want.Metadata.Name}
	id := apiv1.Ref(key.Namespace, key.Name)
	c := r.data.client
	b, _, err := updateCAS(ctx, "role binding "+id, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.RoleBinding, error) {
			return c.RoleBindings.Get(ctx, &apiv1.GetRoleBindingRequest{Key: key})
		},
		func(cur *apiv1.RoleBinding) *apiv1.RoleBinding {
			next := proto.Clone(cur).(*apiv1.RoleBinding)
			next.Spec = want.Spec
			return next
		},
		func(ctx context.Context, next *apiv1.RoleBinding) (*apiv1.RoleBinding, error) {
			return c.RoleBindings.Update(ctx, &apiv1.UpdateRoleBindingRequest{RoleBinding: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, id, r.addError) {
		return
	}
	m := roleBindingToModel(b)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

func (r *roleBindingResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state roleBindingModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a role binding") {
		return
	}
	key := &apiv1.ObjectKey{Namespace: state.Namespace.ValueString(), Name: state.Name.ValueString()}
	c := r.data.client
	deleteCreated(ctx, &r.configuredResource, &resp.Diagnostics, apiv1.Ref(key.Namespace, key.Name), state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.RoleBinding, error) {
			return c.RoleBindings.Get(ctx, &apiv1.GetRoleBindingRequest{Key: key})
		},
		func(ctx context.Context) error {
			_, err := c.RoleBindings.Delete(ctx, &apiv1.DeleteRoleBindingRequest{Key: key})
			return err
		},
		"role binding deleted", "A role binding is never in use; this refusal is the agent's.")
}
