package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Create, read, update and delete of virtplane_storage_class: one call
// each, nothing to wait for (the nodes report how they reach the class in
// their own status). The key goes to the agent at create and whenever the
// configuration changes it, never otherwise.

func (r *storageClassResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan storageClassModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "create a storage class") {
		return
	}
	want, d := storageClassFromModel(ctx, &plan)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := want.GetMetadata().GetName()
	created, err := r.data.client.StorageClasses.Create(ctx, &apiv1.CreateStorageClassRequest{StorageClass: want})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create storage class "+name)
		return
	}
	tflog.Info(ctx, "storage class created", map[string]any{"storage_class": name, "uid": created.GetMetadata().GetUid()})
	r.setState(ctx, &resp.State, &resp.Diagnostics, created, &plan)
}

func (r *storageClassResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state storageClassModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	name := state.Name.ValueString()
	if !r.readyToRefresh(req, resp, "read storage class "+name) {
		return
	}
	sc, err := r.data.client.StorageClasses.Get(ctx, &apiv1.GetStorageClassRequest{Name: name})
	if !r.stillManaged(ctx, resp, name, state.UID.ValueString(), sc.GetMetadata().GetUid(), err) {
		return
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, sc, &state)
}

// Update writes the node selector, monitors, user and key (what the
// schema does not replace the class for), by compare-and-swap. An
// unchanged key is not sent: the agent keeps the one it holds.
func (r *storageClassResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state storageClassModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "update a storage class") {
		return
	}
	want, d := storageClassFromModel(ctx, &plan)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	if rbd := want.GetSpec().GetRbd(); rbd != nil && state.RBD != nil && !state.RBD.Key.IsNull() && cephxKey(state.RBD.Key) == rbd.Key {
		rbd.Key = ""
	}
	name := want.GetMetadata().GetName()
	c := r.data.client
	sc, written, err := updateCAS(tflog.SetField(ctx, "storage_class", name), "storage class "+name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.StorageClass, error) {
			return c.StorageClasses.Get(ctx, &apiv1.GetStorageClassRequest{Name: name})
		},
		func(cur *apiv1.StorageClass) *apiv1.StorageClass { return mergeStorageClass(cur, want) },
		func(ctx context.Context, next *apiv1.StorageClass) (*apiv1.StorageClass, error) {
			return c.StorageClasses.Update(ctx, &apiv1.UpdateStorageClassRequest{StorageClass: next})
		})
	if addCASError(&resp.Diagnostics, err, r.kind, name, r.addError) {
		return
	}
	if written {
		tflog.Info(ctx, "storage class updated", map[string]any{"storage_class": name, "key_sent": want.GetSpec().GetRbd().GetKey() != ""})
	}
	r.setState(ctx, &resp.State, &resp.Diagnostics, sc, &plan)
}

// Delete deletes the class Terraform created (by uid), which the agent
// refuses while a VM or an instance has a volume on it.
func (r *storageClassResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state storageClassModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "delete a storage class") {
		return
	}
	name := state.Name.ValueString()
	c := r.data.client
	deleteCreated(ctx, &r.configuredResource, &resp.Diagnostics, name, state.UID.ValueString(),
		func(ctx context.Context) (*apiv1.StorageClass, error) {
			return c.StorageClasses.Get(ctx, &apiv1.GetStorageClassRequest{Name: name})
		},
		func(ctx context.Context) error {
			_, err := c.StorageClasses.Delete(ctx, &apiv1.DeleteStorageClassRequest{Name: name})
			return err
		},
		"storage class deleted",
		"When those VMs are in this configuration, make their disks' storage_class refer to the class "+
			"(storage_class = virtplane_storage_class.<name>.name) or add depends_on, so that Terraform destroys them "+
			"first. A class is replaced (deleted, then created) when its kind, pool or path changes: that needs its "+
			"volumes gone.")
}

// setState writes sc as state, with the key and spellings of prior (the
// plan or the previous state).
func (r *storageClassResource) setState(ctx context.Context, st stateSetter, diags *diag.Diagnostics, sc *apiv1.StorageClass, prior *storageClassModel) {
	m, d := storageClassToModel(sc, prior)
	diags.Append(d...)
	if d.HasError() {
		return
	}
	diags.Append(st.Set(ctx, &m)...)
}
