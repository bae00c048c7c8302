package provider

import (
	"context"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_namespace resource: a cluster-admin's Namespace, its
// quota and allowed host resources; used is read back. Create, read,
// update and delete are one call each; updates by compare-and-swap (the
// server writes the usage in the same object).

var (
	_ resource.Resource                = (*namespaceResource)(nil)
	_ resource.ResourceWithConfigure   = (*namespaceResource)(nil)
	_ resource.ResourceWithImportState = (*namespaceResource)(nil)
)

var namespaceKind = objectKind{noun: "namespace", title: "Namespace", one: "a namespace", short: "namespace",
	logKey: "namespace", importID: "NAME", attribute: namespaceAttributePath}

// NewNamespaceResource returns the virtplane_namespace resource.
func NewNamespaceResource() resource.Resource {
	return &namespaceResource{configuredResource{kind: namespaceKind}}
}

type namespaceResource struct {
	configuredResource
}

func (r *namespaceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_namespace"
}

func (r *namespaceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if req.ID == "" || strings.Contains(req.ID, "/") {
		resp.Diagnostics.AddError("Invalid import ID", "Import a namespace by its name (team-a). Got "+strconv.Quote(req.ID)+".")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

func (r *namespaceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan namespaceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a namespace") {
		return
	}
	want, d := namespaceFromModel(ctx, &plan)
	if resp.Diagnostics.Append(d...); resp.Diagnostics.HasError() {
		return
	}
	name := want.GetMetadata().GetName()
	created, err := r.data.client.Namespaces.Create(ctx, &apiv1.CreateNamespaceRequest{Namespace: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create namespace "+name)
		return
	}
	tflog.Info(ctx, "namespace created", map[string]any{"namespace": name, "uid": created.GetMetadata().GetUid()})
	r.setState(ctx, &resp.State, &resp.Diagnostics, created, &plan)
}

func (r *namespaceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state namespaceModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	if !r.readyToRefresh(req, resp, "read namespace "+name) {
		return
	}
	ns, err := r.data.client.Namespaces.Get(ctx, &apiv1.GetNamespaceRequest{Name: name})
	if !r.stillManaged(ctx, resp, name, state.UID.ValueString(), ns.GetMetadata().GetUid(), err) {
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, ns, &state)
}

// Update writes the quota and the allowed lists; the usage is the
// server's.
func (r *namespaceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state namespaceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a namespace") {
		return
	}
	want, d := namespaceFromModel(ctx, &plan)
	if resp.Diagnostics.Append(d...); resp.Diagnostics.HasError() {
		return
	}
	name := want.GetMetadata().GetName()
	c := r.data.client
	ns, _, err := updateCAS(ctx, "namespace "+name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.Namespace, error) {
			return c.Namespaces.Get(ctx, &apiv1.GetNamespaceRequest{Name: name})
		},
		func(cur *apiv1.Namespace) *apiv1.Namespace {
			next := proto.Clone(cur).(*apiv1.Namespace)
			next.Spec = want.GetSpec()
			return next
		},
		func(ctx context.Context, next *apiv1.Namespace) (*apiv1.Namespace, error) {
			return c.Namespaces.Update(ctx, &apiv1.UpdateNamespaceRequest{Namespace: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, name, r.addError) {
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, ns, &plan)
}

// Delete deletes the namespace Terraform created, which the agent
// refuses while it has objects.
func (r *namespaceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state namespaceModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a namespace") {
		return
	}
	name := state.Name.ValueString()
	c := r.data.client
	deleteCreated(ctx, &r.configuredResource, &resp.Diagnostics, name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.Namespace, error) {
			return c.Namespaces.Get(ctx, &apiv1.GetNamespaceRequest{Name: name})
		},
		func(ctx context.Context) error {
			_, err := c.Namespaces.Delete(ctx, &apiv1.DeleteNamespaceRequest{Name: name})
			return err
		},
		"namespace deleted",
		"When its objects are in this configuration, make them name the namespace through this resource "+
			"(namespace = virtplane_namespace.<name>.name) or add depends_on, so that Terraform destroys them first.")
}

func (r *namespaceResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, ns *apiv1.Namespace, prior *namespaceModel) {
	m, d := namespaceToModel(ns, prior)
	if diags.Append(d...); d.HasError() {
		return
	}
	diags.Append(st.Set(ctx, &m)...)
}

// namespaceAttributePath maps the API's field paths of a Namespace to
// the attributes: spec.quota.vcpus to quota.vcpus, spec.allowed.bridges[0]
// to allowed.bridges.
func namespaceAttributePath(fieldPath string) (path.Path, bool) {
	norm, _ := normalizeFieldPath(fieldPath)
	switch {
	case norm == "metadata.name":
		return path.Root("name"), true
	case strings.HasPrefix(norm, "spec.quota."), strings.HasPrefix(norm, "spec.allowed."):
		block, attr, _ := strings.Cut(strings.TrimPrefix(norm, "spec."), ".")
		attr, _, _ = strings.Cut(attr, ".")
		attr, _, _ = strings.Cut(attr, "[")
		return path.Root(block).AtName(attr), true
	}
	return path.Empty(), false
}
