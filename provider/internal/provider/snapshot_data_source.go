package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_virtual_machine_snapshot data source: one snapshot by
// namespace and name.

var (
	_ datasource.DataSource              = (*snapshotDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*snapshotDataSource)(nil)
)

// NewSnapshotDataSource returns the virtplane_virtual_machine_snapshot data source.
func NewSnapshotDataSource() datasource.DataSource { return &snapshotDataSource{} }

type snapshotDataSource struct {
	configuredDataSource
}

func (d *snapshotDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_snapshot"
}

// Schema mirrors the resource's attributes, all computed but the name
// and namespace.
func (d *snapshotDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	attrs := map[string]schema.Attribute{
		"name": schema.StringAttribute{
			Required:            true,
			MarkdownDescription: "Name of the snapshot.",
			Validators:          []validator.String{dnsLabelValidator()},
		},
		"namespace": schema.StringAttribute{
			Optional:            true,
			Computed:            true,
			MarkdownDescription: "Namespace of the snapshot. Default `default`.",
			Validators:          []validator.String{dnsLabelValidator()},
		},
		"virtual_machine":  str("Name of the VM the snapshot was taken of."),
		"deletion_policy":  str("`Delete` or `Retain`: what deleting the snapshot does with its data."),
		"failure_deadline": str("How long the snapshot could take before it failed, as a Go duration (`5m`); `0s` is no limit."),
	}
	for name, desc := range snapshotComputedDescriptions {
		switch name {
		case "ready_to_use":
			attrs[name] = schema.BoolAttribute{Computed: true, MarkdownDescription: desc}
		case "indications", "included_volumes", "excluded_volumes":
			attrs[name] = schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: desc}
		default:
			attrs[name] = str(desc)
		}
	}
	attrs["phase"] = str("`InProgress`, `Succeeded`, `Failed` or `Deleting`.")
	attrs["id"] = str("`namespace/name`.")
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads one virtual machine snapshot (`VirtualMachineSnapshot`) by namespace and name: " +
			"its VM, phase, whether it can be restored from, and which volumes it holds. Fails if the snapshot " +
			"does not exist; never waits for one in progress.",
		Attributes: attrs,
	}
}

func (d *snapshotDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg snapshotModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_virtual_machine_snapshot") {
		return
	}
	ns := namespaceOrDefault(cfg.Namespace)
	name := cfg.Name.ValueString()
	s, err := snapshotOps(d.data.client).get(ctx, &apiv1.ObjectKey{Namespace: ns, Name: name})
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, snapshotKind, apiv1.Ref(ns, name),
			"(virtplane-agent snapshot list -n "+ns+" lists them).")
		return
	}
	m, diags := snapshotToModel(s, nil)
	d.record(ctx, resp, &m, diags)
}
