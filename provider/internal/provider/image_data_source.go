package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_image data source: one image by name.

var (
	_ datasource.DataSource              = (*imageDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*imageDataSource)(nil)
)

// NewImageDataSource returns the virtplane_image data source.
func NewImageDataSource() datasource.DataSource { return &imageDataSource{} }

type imageDataSource struct {
	configuredDataSource
}

func (d *imageDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_image"
}

// Schema mirrors the resource's attributes, all computed except the name.
func (d *imageDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	statusAttrs := map[string]schema.Attribute{}
	for name, t := range imageNodeStatusAttrTypes {
		desc := imageNodeStatusDescriptions[name]
		if t == types.Int64Type {
			statusAttrs[name] = schema.Int64Attribute{Computed: true, MarkdownDescription: desc}
		} else {
			statusAttrs[name] = str(desc)
		}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads one image (an Image the nodes pull by URL) by name: its source, pull " +
			"policy and what each node reported. Fails if the image does not exist.",
		Attributes: map[string]schema.Attribute{
			"id": str("The image's name."),
			"name": schema.StringAttribute{
				Required:            true,
				MarkdownDescription: "Name of the image (`debian-12.qcow2`).",
				Validators:          []validator.String{imageNameValidator()},
			},
			"url":    str("Where nodes download it."),
			"sha256": str("SHA-256 the download must have (lower case); null when not set."),
			"format": str("`qcow2` or `raw`; null when it comes from the name or the download."),
			"nodes":  str("`\"all\"` (every node pulls it) or `\"\"` (on demand)."),
			"max_size": schema.StringAttribute{Computed: true, CustomType: quantityType{},
				MarkdownDescription: "The most a node downloads of the image (a quantity)."},
			"labels": schema.MapAttribute{
				Computed: true, ElementType: types.StringType,
				MarkdownDescription: "Labels of the image; empty when it has none.",
			},
			"uid": str("Unique ID the agent gave the image."),
			"node_status": schema.ListNestedAttribute{
				Computed:            true,
				MarkdownDescription: "What each node that pulled, is pulling or failed to pull the image last reported, sorted by node.",
				NestedObject:        schema.NestedAttributeObject{Attributes: statusAttrs},
			},
		},
	}
}

func (d *imageDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg imageModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_image") {
		return
	}
	name := cfg.Name.ValueString()
	img, err := d.data.client.Images.Get(ctx, &apiv1.GetImageRequest{Name: name})
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, imageKind, name, "(virtplane-agent image get lists them). "+
			"An image in a node's image directory that no virtplane_image made is listed by data source virtplane_nodes.")
		return
	}
	m, diags := imageToModel(img, nil, true)
	d.record(ctx, resp, &m, diags)
}
