package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_namespace data source: one namespace's quota, allowed
// host resources and usage. Anyone with a role in the namespace may read
// it, so an editor's configuration can check its headroom
// (data.virtplane_namespace.team.used.vcpus).

var (
	_ datasource.DataSource              = (*namespaceDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*namespaceDataSource)(nil)
)

// NewNamespaceDataSource returns the virtplane_namespace data source.
func NewNamespaceDataSource() datasource.DataSource { return &namespaceDataSource{} }

type namespaceDataSource struct {
	configuredDataSource
}

func (d *namespaceDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_namespace"
}

func (d *namespaceDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	desc := namespaceDescriptions
	num := func(d string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, MarkdownDescription: d}
	}
	strs := func(d string) schema.ListAttribute {
		return schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: d}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads one namespace: its quota, the host resources its VMs may use and what its objects use now " +
			"(docs/security.md). Anyone with a role in the namespace may read it. A namespace that has objects but no quota reads " +
			"with `quota` and `allowed` null; one that does not exist fails.",
		Attributes: map[string]schema.Attribute{
			"id":   schema.StringAttribute{Computed: true, MarkdownDescription: "The namespace's name."},
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "The namespace.", Validators: []validator.String{dnsLabelValidator()}},
			"uid":  schema.StringAttribute{Computed: true, MarkdownDescription: "Unique ID the agent gave the namespace."},
			"quota": schema.SingleNestedAttribute{Computed: true, MarkdownDescription: desc["quota"] + " Null when it has none.",
				Attributes: map[string]schema.Attribute{
					"vcpus": num(desc["vcpus"] + " Null: unlimited."), "vms": num(desc["vms"] + " Null: unlimited."),
					"images":             num(desc["images"] + " Null: unlimited."),
					"memory":             schema.StringAttribute{Computed: true, CustomType: quantityType{}, MarkdownDescription: desc["memory"] + " Null: unlimited."},
					"persistent_storage": schema.MapAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: desc["persistent_storage"]},
				}},
			"allowed": schema.SingleNestedAttribute{Computed: true, MarkdownDescription: desc["allowed"] + " Null when it narrows nothing.",
				Attributes: map[string]schema.Attribute{
					"bridges": strs(desc["bridges"]), "networks": strs(desc["networks"]),
					"storage_classes": strs(desc["storage_classes"]), "port_forward_ranges": strs(desc["port_forward_ranges"]),
				}},
			"used": schema.SingleNestedAttribute{Computed: true, MarkdownDescription: desc["used"],
				Attributes: map[string]schema.Attribute{
					"vcpus": num(desc["vcpus"]), "memory": schema.StringAttribute{Computed: true, MarkdownDescription: "Guest memory, a quantity."},
					"vms": num(desc["vms"]), "images": num(desc["images"]),
					"persistent_storage": schema.MapAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Persistent volumes' sizes per storage class."},
				}},
		},
	}
}

func (d *namespaceDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg namespaceDataModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_namespace") {
		return
	}
	name := cfg.Name.ValueString()
	ns, err := d.data.client.Namespaces.Get(ctx, &apiv1.GetNamespaceRequest{Name: name})
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, namespaceKind, name,
			"(virtplane-agent get namespaces lists those the credential may see).")
		return
	}
	m, diags := namespaceToModel(ns, nil)
	d.record(ctx, resp, &m, diags)
}
