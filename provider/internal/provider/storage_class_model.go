package provider

import (
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The virtplane_storage_class model: the resource's, and the data
// source's, which has no key (no read returns it).

// storageClassModel is the resource's state. Exactly one of RBD and
// SharedFilesystem is set (ValidateConfig).
type storageClassModel struct {
	ID               types.String           `tfsdk:"id"`
	Name             types.String           `tfsdk:"name"`
	RBD              *rbdModel              `tfsdk:"rbd"`
	SharedFilesystem *sharedFilesystemModel `tfsdk:"shared_filesystem"`
	NodeSelector     types.Map              `tfsdk:"node_selector"`
	UID              types.String           `tfsdk:"uid"`
	KeySet           types.Bool             `tfsdk:"key_set"`
	Ready            types.Bool             `tfsdk:"ready"`
	Message          types.String           `tfsdk:"message"`
}

// rbdModel is the rbd block. Monitors is a list value, not a slice: it
// may be unknown at plan time.
type rbdModel struct {
	Monitors types.List   `tfsdk:"monitors"`
	Pool     types.String `tfsdk:"pool"`
	User     types.String `tfsdk:"user"`
	Key      types.String `tfsdk:"key"`
}

type sharedFilesystemModel struct {
	Path types.String `tfsdk:"path"`
}

// storageClassDataModel is the data source's state: the resource's
// without the key.
type storageClassDataModel struct {
	ID               types.String           `tfsdk:"id"`
	Name             types.String           `tfsdk:"name"`
	RBD              *rbdDataModel          `tfsdk:"rbd"`
	SharedFilesystem *sharedFilesystemModel `tfsdk:"shared_filesystem"`
	NodeSelector     types.Map              `tfsdk:"node_selector"`
	UID              types.String           `tfsdk:"uid"`
	KeySet           types.Bool             `tfsdk:"key_set"`
	Ready            types.Bool             `tfsdk:"ready"`
	Message          types.String           `tfsdk:"message"`
}

type rbdDataModel struct {
	Monitors types.List   `tfsdk:"monitors"`
	Pool     types.String `tfsdk:"pool"`
	User     types.String `tfsdk:"user"`
}
