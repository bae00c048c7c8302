package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_virtual_machine_pool data source: one pool by namespace
// and name, with the attributes of its resource (all computed but the key)
// and its status.

var (
	_ datasource.DataSource              = (*poolDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*poolDataSource)(nil)
)

// NewPoolDataSource returns the virtplane_virtual_machine_pool data source.
func NewPoolDataSource() datasource.DataSource { return &poolDataSource{} }

type poolDataSource struct {
	configuredDataSource
}

func (d *poolDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_pool"
}

func (d *poolDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	attrs := dataReplicaAttributes("pool", "VMs")
	maps.Copy(attrs, map[string]schema.Attribute{
		"max_unavailable": str("How many VMs a rollout may restart at once: a number (`\"1\"`) or a percentage of replicas (`\"25%\"`)."),
		"scale_in_order":  str("`DescendingOrder`, `AscendingOrder`, `Newest` or `Oldest`: which VMs go first when the pool shrinks."),
		"virtual_machine_template": schema.SingleNestedAttribute{
			Computed:    true,
			Description: "What each VM is made from, as the `virtplane_virtual_machine` data source has a VM's settings.",
			Attributes: dataVMSpecAttributes("Labels of each VM; empty when there are none.",
				"Annotations of each VM's instance template; empty when there are none."),
		},
		"status": schema.SingleNestedAttribute{
			Computed:    true,
			Description: "What the pool's controller last reported.",
			Attributes: dataReplicaStatusAttributes("VMs", "vm_names", "Names of the VMs not being deleted, by ordinal.",
				map[string]schema.Attribute{"updated_replicas": schema.Int64Attribute{
					Computed: true, Description: "VMs on the current template.",
				}}),
		},
	})
	resp.Schema = schema.Schema{
		Description: "Reads one virtual machine pool by namespace and name: its settings, as the " +
			"`virtplane_virtual_machine_pool` resource has them, its VMs' names and its status. Fails if the pool does not exist.",
		Attributes: attrs,
	}
}

func (d *poolDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg poolModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_virtual_machine_pool") {
		return
	}
	ns := namespaceOrDefault(cfg.Namespace)
	id := apiv1.Ref(ns, cfg.Name.ValueString())
	p, err := poolOps.get(ctx, d.data.client, &apiv1.ObjectKey{Namespace: ns, Name: cfg.Name.ValueString()})
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, poolKind, id, "(virtplane-agent get pool lists the existing ones).")
		return
	}
	vms, err := poolVMs(ctx, d.data.client, p)
	if err != nil {
		addObjectError(&resp.Diagnostics, err, d.data.endpoint, "list the VMs of virtual machine pool "+id, poolKind)
		return
	}
	m, diags := poolToModel(p, liveNames(vms), nil, true)
	d.record(ctx, resp, &m, diags)
}

// liveNames are the names of the objects not being deleted, in order.
func liveNames[T metaObject](objs []T) []string {
	out := []string{}
	for _, o := range objs {
		if o.GetMetadata().GetDeletionTimestamp() == nil {
			out = append(out, o.GetMetadata().GetName())
		}
	}
	return out
}
