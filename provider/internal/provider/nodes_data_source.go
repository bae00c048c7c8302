package provider

import (
	"context"
	"sort"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_nodes data source: the registered nodes, with what
// placement decisions need to know of them.

var (
	_ datasource.DataSource              = (*nodesDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*nodesDataSource)(nil)
)

// NewNodesDataSource returns the virtplane_nodes data source.
func NewNodesDataSource() datasource.DataSource { return &nodesDataSource{} }

type nodesDataSource struct {
	configuredDataSource
}

type nodesDataSourceModel struct {
	ID            types.String `tfsdk:"id"`
	LabelSelector types.String `tfsdk:"label_selector"`
	Nodes         []nodeModel  `tfsdk:"nodes"`
}

type nodeModel struct {
	Name           types.String      `tfsdk:"name"`
	Ready          types.Bool        `tfsdk:"ready"`
	Schedulable    types.Bool        `tfsdk:"schedulable"`
	Unschedulable  types.Bool        `tfsdk:"unschedulable"`
	Draining       types.Bool        `tfsdk:"draining"`
	Drained        types.Bool        `tfsdk:"drained"`
	CPU            types.String      `tfsdk:"cpu"`
	Memory         types.String      `tfsdk:"memory"`
	CapacityCPU    types.String      `tfsdk:"capacity_cpu"`
	CapacityMemory types.String      `tfsdk:"capacity_memory"`
	KVMUsable      types.Bool        `tfsdk:"kvm_usable"`
	AgentVersion   types.String      `tfsdk:"agent_version"`
	LibvirtVersion types.String      `tfsdk:"libvirt_version"`
	QEMUVersion    types.String      `tfsdk:"qemu_version"`
	Heartbeat      types.String      `tfsdk:"heartbeat"`
	Labels         map[string]string `tfsdk:"labels"`
	Images         []nodeImageModel  `tfsdk:"images"`
	Bridges        []string          `tfsdk:"bridges"`
	Networks       []string          `tfsdk:"networks"`
}

type nodeImageModel struct {
	Name        types.String `tfsdk:"name"`
	Format      types.String `tfsdk:"format"`
	VirtualSize types.Int64  `tfsdk:"virtual_size"`
	Size        types.Int64  `tfsdk:"size"`
	SHA256      types.String `tfsdk:"sha256"`
}

func (d *nodesDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_nodes"
}

func (d *nodesDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	boolean := func(desc string) schema.BoolAttribute { return schema.BoolAttribute{Computed: true, Description: desc} }
	resp.Schema = schema.Schema{
		Description: "Lists the nodes registered with the virtplane agent, with their readiness, resources and " +
			"versions, optionally filtered by labels. Use it to pick a node for a VM or to check that a host is " +
			"ready before placing work on it.",
		Attributes: map[string]schema.Attribute{
			"id": str("The label selector in canonical form, or `*` when all nodes were listed."),
			"label_selector": schema.StringAttribute{
				Optional: true,
				Description: "Only list nodes whose labels match this selector, in Kubernetes syntax: " +
					"`zone=a`, `gpu!=true`, `tier in (db,web)`, `!maintenance`, comma-separated for AND. " +
					"Unset lists every node.",
				Validators: []validator.String{labelSelectorValidator()},
			},
			"nodes": schema.ListNestedAttribute{
				Computed:    true,
				Description: "The matching nodes, sorted by name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name": str("Node name, usually the host name."),
					"ready": boolean("Whether the node's `Ready` condition is `True`, i.e. its agent is " +
						"posting heartbeats. False when the condition is `False`, `Unknown` or missing."),
					"schedulable": boolean("Whether the node agent reports that it can run new instances " +
						"(for example KVM and libvirt are usable)."),
					"unschedulable": boolean("Whether an operator cordoned the node (`spec.unschedulable`) " +
						"to keep new instances off it."),
					"draining": boolean("Whether the node is being drained (`spec.drain`): cordoned, with every " +
						"instance leaving it by its VM's `eviction_strategy`. Uncordoning ends the drain."),
					"drained": boolean("Whether a drain has finished: no instance that has to leave is on the " +
						"node any more. False when the node is not draining."),
					"cpu":             str("Allocatable CPUs as a quantity (`7`, `7500m`); null if not reported."),
					"memory":          str("Allocatable memory as a quantity (`30Gi`); null if not reported."),
					"capacity_cpu":    str("Total CPUs of the host as a quantity; null if not reported."),
					"capacity_memory": str("Total memory of the host as a quantity; null if not reported."),
					"kvm_usable":      boolean("Whether `/dev/kvm` is usable, so instances get hardware virtualisation."),
					"agent_version":   str("Version of the virtplane node agent; null if not reported."),
					"libvirt_version": str("Version of libvirt on the node; null if not reported."),
					"qemu_version":    str("Version of QEMU on the node; null if not reported."),
					"heartbeat":       str("Time of the last heartbeat, RFC 3339 in UTC; null if none was received."),
					"labels": schema.MapAttribute{
						Computed:    true,
						ElementType: types.StringType,
						Description: "Node labels; empty when the node has none. Those under `" + apiv1.NodeLabelPrefix + "` are the node's own (its agent reports them, `" + apiv1.LabelKVM + "` among them), `" + apiv1.LabelNodeName + "` is its name, and the others are admins' (`virtplane_node_labels`, `virtplane-agent node label`), which the node cannot change.",
					},
					"images": schema.ListNestedAttribute{
						Computed: true,
						Description: "Base images in the node's image directory, sorted by name: what `image` " +
							"volumes, `persistent.image` and `boot` files may name on this node. The node agent " +
							"refreshes the list about every 15 seconds.",
						NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
							"name":   str("Image name, its path relative to the node image directory."),
							"format": str("Format as qemu-img reports it (`qcow2`, `raw`, ...)."),
							"virtual_size": schema.Int64Attribute{Computed: true,
								Description: "Size the guest sees, in bytes; a persistent volume copied from the image must be at least this large."},
							"size":   schema.Int64Attribute{Computed: true, Description: "File size on disk, in bytes."},
							"sha256": str("Hex SHA-256 of the image file."),
						}},
					},
					"bridges": schema.ListAttribute{
						Computed:    true,
						ElementType: types.StringType,
						Description: "Linux bridges on the node, sorted: what an interface's `bridge.name` may name for " +
							"the VM to be placed here. Refreshed by the node agent with the images.",
					},
					"networks": schema.ListAttribute{
						Computed:    true,
						ElementType: types.StringType,
						Description: "Active libvirt networks on the node, sorted: what an interface's `network.name` " +
							"may name for the VM to be placed here.",
					},
				}},
			},
		},
	}
}

func (d *nodesDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m nodesDataSourceModel
	if !d.readConfig(ctx, req, resp, &m, "read virtplane_nodes") {
		return
	}

	selector := m.LabelSelector.ValueString()
	out, err := d.data.client.Nodes.List(ctx, &apiv1.ListNodesRequest{LabelSelector: selector})
	if err != nil {
		addListError(&resp.Diagnostics, err, d.data.endpoint, m.LabelSelector, "list nodes")
		return
	}

	m.ID = types.StringValue(selectorID(selector))
	m.Nodes = nodeModels(out.GetItems())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// nodeModels maps API nodes to the schema, sorted by name so that the list
// does not reorder between refreshes.
func nodeModels(items []*apiv1.Node) []nodeModel {
	out := make([]nodeModel, 0, len(items))
	for _, n := range items {
		out = append(out, nodeToModel(n))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name.ValueString() < out[j].Name.ValueString() })
	return out
}

func nodeToModel(n *apiv1.Node) nodeModel {
	st := n.GetStatus()
	info := st.GetNodeInfo()
	ready := apiv1.IsConditionTrue(st.GetConditions(), apiv1.ConditionReady)
	m := nodeModel{
		Name:           types.StringValue(n.GetMetadata().GetName()),
		Ready:          types.BoolValue(ready),
		Schedulable:    types.BoolValue(st.GetSchedulable()),
		Unschedulable:  types.BoolValue(n.GetSpec().GetUnschedulable()),
		Draining:       types.BoolValue(n.GetSpec().GetDrain()),
		Drained:        types.BoolValue(n.Drained()),
		CPU:            optString(st.GetAllocatable()["cpu"]),
		Memory:         optString(st.GetAllocatable()["memory"]),
		CapacityCPU:    optString(st.GetCapacity()["cpu"]),
		CapacityMemory: optString(st.GetCapacity()["memory"]),
		KVMUsable:      types.BoolValue(info.GetKvmUsable()),
		AgentVersion:   optString(info.GetAgentVersion()),
		LibvirtVersion: optString(info.GetLibvirtVersion()),
		QEMUVersion:    optString(info.GetQemuVersion()),
		Heartbeat:      types.StringNull(),
		// Never null, so that lookup(node.labels, "k", "") works.
		Labels: map[string]string{},
	}
	if hb := st.GetHeartbeat(); hb != nil {
		m.Heartbeat = types.StringValue(hb.AsTime().UTC().Format(time.RFC3339))
	}
	for k, v := range n.GetMetadata().GetLabels() {
		m.Labels[k] = v
	}
	m.Images = make([]nodeImageModel, 0, len(st.GetImages()))
	for _, img := range st.GetImages() {
		m.Images = append(m.Images, nodeImageModel{
			Name: types.StringValue(img.GetName()), Format: types.StringValue(img.GetFormat()),
			VirtualSize: types.Int64Value(img.GetVirtualSizeBytes()), Size: types.Int64Value(img.GetSizeBytes()),
			SHA256: types.StringValue(img.GetSha256()),
		})
	}
	sort.Slice(m.Images, func(i, j int) bool { return m.Images[i].Name.ValueString() < m.Images[j].Name.ValueString() })
	// Never null, so that contains(node.bridges, "br0") works; sorted
	// here too, whatever an older agent stored.
	m.Bridges = sortedCopy(st.GetBridges())
	m.Networks = sortedCopy(st.GetNetworks())
	return m
}

func sortedCopy(ss []string) []string {
	out := append([]string{}, ss...)
	sort.Strings(out)
	return out
}
