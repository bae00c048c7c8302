package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The schema of the virtplane_storage_class resource. Its descriptions
// are the documentation (tfplugindocs renders them into docs/).

// storageClassDescriptions describe what the resource and the data source
// share.
var storageClassDescriptions = map[string]string{
	"monitors": fmt.Sprintf("The Ceph monitors, 1 to %d `IP:port` (3300 speaks msgr2, 6789 msgr1; "+
		"`[IPv6]:port`): IP literals, no host names, which each node would resolve on its own.", validation.MaxRBDMonitors),
	"pool": "The Ceph pool the class's volumes, their image bases and snapshots live in (it must exist).",
	"user": "The cephx user QEMU and the nodes connect as, without `client.` (`virtplane`). It needs " +
		"`mon 'profile rbd'` and `osd 'profile rbd pool=<pool>'`.",
	"path": "The absolute path the filesystem is mounted at on every node the class selects; volumes are " +
		"qcow2 files under `<path>/virtplane`. virtplane does not mount it.",
	"node_selector": "Labels a node must all have to use the class (as a VM's `node_selector`); unset: every node. " +
		"Volumes of the class are placed only on nodes it selects that report it ready.",
	"uid": "Unique ID the agent gave the class; a class re-created under the same name gets a new one.",
	"key_set": "Whether the agent holds a key for the class (`rbd` only; reads never return the key itself). " +
		"False for a shared filesystem.",
	"ready": "Whether the agent reached the storage with the class's settings (its `Ready` condition is " +
		"`True`); false while it has not checked them or could not.",
	"message": "Why the class is not ready, as the agent says; null when it says nothing.",
}

func (r *storageClassResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	computedStr := func(name string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: storageClassDescriptions[name]}
	}
	computedBool := func(name string) schema.BoolAttribute {
		return schema.BoolAttribute{Computed: true, MarkdownDescription: storageClassDescriptions[name]}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A storage class: where persistent volumes live when they must outlive a node " +
			"(KubeVirt's StorageClass, Proxmox's storage definitions). Exactly one of `rbd` (a pool of an " +
			"existing Ceph cluster, whose images QEMU opens itself) and `shared_filesystem` (a filesystem the " +
			"operator mounts at the same path on every node the class selects: NFS, CephFS). A VM's disk names " +
			"it in `persistent { storage_class = virtplane_storage_class.ceph.name }`; `local`, a file on the " +
			"VM's node, is built in and needs no resource. The kind, `rbd.pool` and `shared_filesystem.path` " +
			"cannot change (volumes live there): changing one replaces the class, which the agent refuses " +
			"while a VM uses it. The node selector, monitors, user and key change in place.\n\n" +
			"The cephx key is write-only on the agent: no read returns it (`key_set` says whether one is " +
			"stored), so Terraform keeps the configured value in its state (marked sensitive, never shown in " +
			"plans) and cannot see a key changed outside Terraform. An imported class has no key in the state: " +
			"the next apply writes the configured one (planned as an in-place update).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "The class's name, also the import ID.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "Name of the class, which volumes' `storage_class` names: a DNS-1123 label, " +
					"not `local` (the built-in class). Changing it replaces the class.",
				Validators:    []validator.String{storageClassNameValidator()},
				PlanModifiers: replace,
			},
			"node_selector": schema.MapAttribute{
				Optional:            true,
				ElementType:         types.StringType,
				MarkdownDescription: storageClassDescriptions["node_selector"] + " Changes in place.",
				Validators:          []validator.Map{labelMapValidator()},
			},
			"uid": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: storageClassDescriptions["uid"],
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"key_set": computedBool("key_set"),
			"ready":   computedBool("ready"),
			"message": computedStr("message"),
		},
		Blocks: map[string]schema.Block{
			// The attributes are required in the block, but a block's
			// Required attributes would be required of configurations
			// without the block too: ValidateConfig checks them.
			"rbd": schema.SingleNestedBlock{
				MarkdownDescription: "A pool of an existing Ceph cluster: volumes are RBD images that QEMU opens " +
					"itself (no kernel map). Setting or removing the block (changing the kind) replaces the class.",
				PlanModifiers: []planmodifier.Object{kindChangeReplaces()},
				Attributes: map[string]schema.Attribute{
					"monitors": schema.ListAttribute{
						Optional:            true,
						ElementType:         types.StringType,
						MarkdownDescription: storageClassDescriptions["monitors"] + " Required. Changes in place.",
						Validators: []validator.List{
							listvalidator.SizeBetween(1, validation.MaxRBDMonitors),
							storageClassMonitorsValidator(),
						},
					},
					"pool": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: storageClassDescriptions["pool"] + " Required. Changing it replaces the class.",
						Validators:          []validator.String{storageClassFieldValidator("spec.rbd.pool")},
						PlanModifiers:       replace,
					},
					"user": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: storageClassDescriptions["user"] + " Required. Changes in place.",
						Validators:          []validator.String{storageClassFieldValidator("spec.rbd.user")},
					},
					"key": schema.StringAttribute{
						Optional:  true,
						Sensitive: true,
						MarkdownDescription: "The user's key, as `ceph auth get-key client.<user>` prints it " +
							"(`file(\"virtplane.key\")` reads it from a file, spaces around it dropped). Required. " +
							"Sensitive: the agent hands it only to the nodes the class selects, as a libvirt secret; " +
							"no read returns it. Changes in place.",
						Validators: []validator.String{storageClassFieldValidator("spec.rbd.key")},
					},
				},
			},
			"shared_filesystem": schema.SingleNestedBlock{
				MarkdownDescription: "A filesystem mounted at the same path on every node the class selects " +
					"(NFS, CephFS, ...). Setting or removing the block (changing the kind) replaces the class.",
				PlanModifiers: []planmodifier.Object{kindChangeReplaces()},
				Attributes: map[string]schema.Attribute{
					"path": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: storageClassDescriptions["path"] + " Required. Changing it replaces the class.",
						Validators:          []validator.String{storageClassFieldValidator("spec.shared_filesystem.path")},
						PlanModifiers:       replace,
					},
				},
			},
		},
	}
}

// kindChangeReplaces replaces the class when its block is set where it
// was not, or removed: the kind of a class cannot change.
func kindChangeReplaces() planmodifier.Object {
	const why = "Changing the kind of a storage class (rbd, shared_filesystem) replaces it."
	return objectplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = req.StateValue.IsNull() != req.PlanValue.IsNull()
	}, why, why)
}
