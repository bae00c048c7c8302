package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_virtual_machine_replica_set data source: one replica set
// by namespace and name, with the attributes of its resource (all computed
// but the key) and its status.

var (
	_ datasource.DataSource              = (*replicaSetDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*replicaSetDataSource)(nil)
)

// NewReplicaSetDataSource returns the virtplane_virtual_machine_replica_set
// data source.
func NewReplicaSetDataSource() datasource.DataSource { return &replicaSetDataSource{} }

type replicaSetDataSource struct {
	configuredDataSource
}

func (d *replicaSetDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_replica_set"
}

func (d *replicaSetDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	attrs := dataReplicaAttributes("replica set", "instances")
	maps.Copy(attrs, map[string]schema.Attribute{
		"template": schema.SingleNestedAttribute{
			Computed:    true,
			Description: "What each instance is made from, as the `virtplane_virtual_machine` data source has a VM's instance settings.",
			Attributes: dataInstanceSpecAttributes("Labels of each instance; empty when there are none.",
				"Annotations of each instance; empty when there are none."),
		},
		"status": schema.SingleNestedAttribute{
			Computed:    true,
			Description: "What the replica set's controller last reported.",
			Attributes:  dataReplicaStatusAttributes("instances", "instance_names", "Names of the instances that are not ending, by name.", nil),
		},
	})
	resp.Schema = schema.Schema{
		Description: "Reads one replica set (KubeVirt's VirtualMachineInstanceReplicaSet) by namespace and name: its " +
			"settings, as the `virtplane_virtual_machine_replica_set` resource has them, its instances' names and its " +
			"status. Fails if the replica set does not exist.",
		Attributes: attrs,
	}
}

func (d *replicaSetDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg replicaSetModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_virtual_machine_replica_set") {
		return
	}
	ns := namespaceOrDefault(cfg.Namespace)
	id := apiv1.Ref(ns, cfg.Name.ValueString())
	v, err := readReplicaSet(ctx, d.data.client, ns, cfg.Name.ValueString())
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, replicaSetKind, id, "(virtplane-agent get rs lists the existing ones).")
		return
	}
	m, diags := replicaSetToModel(v.rs, liveInstanceNames(v.vmis), nil, true)
	d.record(ctx, resp, &m, diags)
}
