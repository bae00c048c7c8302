package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_storage_class data source: one storage class by name,
// without its key (no read returns it).

var (
	_ datasource.DataSource              = (*storageClassDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*storageClassDataSource)(nil)
)

// NewStorageClassDataSource returns the virtplane_storage_class data source.
func NewStorageClassDataSource() datasource.DataSource { return &storageClassDataSource{} }

type storageClassDataSource struct {
	configuredDataSource
}

func (d *storageClassDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_storage_class"
}

// Schema mirrors the resource's attributes, all computed except the name,
// and no key.
func (d *storageClassDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	boolean := func(desc string) schema.BoolAttribute {
		return schema.BoolAttribute{Computed: true, MarkdownDescription: desc}
	}
	desc := storageClassDescriptions
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads one storage class by name: its kind, where its volumes are, its node selector " +
			"and whether the agent found it ready; never its key. A VM's disk names it in " +
			"`persistent { storage_class = data.virtplane_storage_class.ceph.name }`. Fails if the class does not exist.",
		Attributes: map[string]schema.Attribute{
			"id": str("The class's name."),
			"name": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "Name of the class (`ceph`).",
				Validators:          []validator.String{storageClassNameValidator()},
			},
			"rbd": schema.SingleNestedAttribute{
				Computed:            true,
				MarkdownDescription: "The Ceph pool, for an `rbd` class; null otherwise. No key: reads never return it (see `key_set`).",
				Attributes: map[string]schema.Attribute{
					"monitors": schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: desc["monitors"]},
					"pool":     str(desc["pool"]),
					"user":     str(desc["user"]),
				},
			},
			"shared_filesystem": schema.SingleNestedAttribute{
				Computed:            true,
				MarkdownDescription: "The mount path, for a `shared_filesystem` class; null otherwise.",
				Attributes:          map[string]schema.Attribute{"path": str(desc["path"])},
			},
			"node_selector": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: desc["node_selector"] + " Empty when it has none.",
			},
			"uid":     str(desc["uid"]),
			"key_set": boolean(desc["key_set"]),
			"ready":   boolean(desc["ready"]),
			"message": str(desc["message"]),
		},
	}
}

func (d *storageClassDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg storageClassDataModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_storage_class") {
		return
	}
	name := cfg.Name.ValueString()
	sc, err := d.data.client.StorageClasses.Get(ctx, &apiv1.GetStorageClassRequest{Name: name})
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, storageClassKind, name,
			"(virtplane-agent get storageclasses lists them). \"local\", a file on the VM's node, is built in and is no object.")
		return
	}
	m, diags := storageClassToModel(sc, nil)
	out := storageClassDataFromModel(m, &diags)
	d.record(ctx, resp, &out, diags)
}
