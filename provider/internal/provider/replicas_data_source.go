package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The data sources virtplane_virtual_machine_pool and
// virtplane_virtual_machine_replica_set: one pool or replica set by
// namespace and name, with the attributes of its resource (all computed
// but the key) and its status.

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
	ns := orDefault(cfg.Namespace.ValueString(), apiv1.DefaultNamespace)
	id := namespacedID(ns, cfg.Name.ValueString())
	p, err := d.data.client.Pools.Get(ctx, &apiv1.GetPoolRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: cfg.Name.ValueString()}})
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
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

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
	ns := orDefault(cfg.Namespace.ValueString(), apiv1.DefaultNamespace)
	id := namespacedID(ns, cfg.Name.ValueString())
	v, err := readReplicaSet(ctx, d.data.client, ns, cfg.Name.ValueString())
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, replicaSetKind, id, "(virtplane-agent get rs lists the existing ones).")
		return
	}
	m, diags := replicaSetToModel(v.rs, liveInstanceNames(v.vmis), nil, true)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
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

// dataReplicaAttributes are the attributes both data sources have at their
// root, but the template and status.
func dataReplicaAttributes(noun, replicas string) map[string]schema.Attribute {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	return map[string]schema.Attribute{
		"id": str("`namespace/name`."),
		"name": schema.StringAttribute{
			Required:    true,
			Description: "Name of the " + noun + ".",
			Validators:  []validator.String{dnsLabelValidator()},
		},
		"namespace": schema.StringAttribute{
			Optional:    true,
			Computed:    true,
			Description: "Namespace of the " + noun + ". Default `default`.",
			Validators:  []validator.String{dnsLabelValidator()},
		},
		"uid":      str("Unique ID the agent gave the " + noun + "."),
		"replicas": schema.Int64Attribute{Computed: true, Description: "How many " + replicas + " the " + noun + " keeps."},
		"selector": schema.MapAttribute{
			Computed: true, ElementType: types.StringType,
			Description: "Labels that select the " + noun + "'s " + replicas + ".",
		},
		"paused": schema.BoolAttribute{Computed: true, Description: "Whether the " + noun + "'s controller is paused."},
	}
}

// dataReplicaStatusAttributes is replicaStatusAttributes for data sources.
func dataReplicaStatusAttributes(replicas, names, namesDesc string, more map[string]schema.Attribute) map[string]schema.Attribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	out := map[string]schema.Attribute{
		"replicas":       schema.Int64Attribute{Computed: true, Description: upperFirst(replicas) + " that exist and are not being deleted."},
		"ready_replicas": schema.Int64Attribute{Computed: true, Description: upperFirst(replicas) + " that are ready."},
		"conditions": schema.ListNestedAttribute{
			Computed:    true,
			Description: "Conditions: `ReplicaFailure` and `ReplicaPaused`.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"type":    str("Condition type."),
				"status":  str("`True`, `False` or `Unknown`."),
				"reason":  str("Machine-readable reason."),
				"message": str("Human-readable explanation."),
			}},
		},
		names: schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: namesDesc},
	}
	maps.Copy(out, more)
	return out
}
