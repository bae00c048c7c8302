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

// The virtplane_virtual_machine data source: one VM by namespace and name,
// with the attributes of its resource (all computed but the key).

var (
	_ datasource.DataSource              = (*vmDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*vmDataSource)(nil)
)

// NewVMDataSource returns the virtplane_virtual_machine data source.
func NewVMDataSource() datasource.DataSource { return &vmDataSource{} }

type vmDataSource struct {
	configuredDataSource
}

func (d *vmDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine"
}

// Schema mirrors the resource's attributes, all computed except the key,
// so that outputs and expressions work the same on either.
func (d *vmDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	attrs := dataVMSpecAttributes("Labels of the VM; empty when it has none.",
		"Annotations of the VM's instance template; empty when it has none.")
	maps.Copy(attrs, map[string]schema.Attribute{
		"id": str("`namespace/name`."),
		"name": schema.StringAttribute{
			Required:    true,
			Description: "Name of the VM.",
			Validators:  []validator.String{dnsLabelValidator()},
		},
		"namespace": schema.StringAttribute{
			Optional:    true,
			Computed:    true,
			Description: "Namespace of the VM. Default `default`.",
			Validators:  []validator.String{dnsLabelValidator()},
		},
		"uid":              str("Unique ID the agent gave the VM."),
		"restart_required": schema.BoolAttribute{Computed: true, Description: "Whether the running instance predates a change that needs a restart."},
		"status": schema.SingleNestedAttribute{
			Computed:    true,
			Description: "What the agent last reported.",
			Attributes:  dataStatusAttributes(),
		},
	})
	resp.Schema = schema.Schema{
		Description: "Reads one virtual machine by namespace and name: its settings, as the " +
			"`virtplane_virtual_machine` resource has them, and its current status. Fails if the VM does not exist.",
		Attributes: attrs,
	}
}

// dataStatusAttributes is the status schema of the resource, for data
// sources.
func dataStatusAttributes() map[string]schema.Attribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return map[string]schema.Attribute{
		"printable_status": str("KubeVirt's printable status: `Running`, `Stopped`, `Starting`, `Stopping`, ..."),
		"phase":            str("Phase of the current instance; null when the VM has no instance."),
		"ready":            schema.BoolAttribute{Computed: true, Description: "Whether the instance is running and ready."},
		"node":             str("Node the current instance is placed on; null when there is none."),
		"conditions": schema.ListNestedAttribute{
			Computed:    true,
			Description: "Conditions of the VM.",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"type":    str("Condition type."),
				"status":  str("`True`, `False` or `Unknown`."),
				"reason":  str("Machine-readable reason."),
				"message": str("Human-readable explanation."),
			}},
		},
		"interfaces": dataInterfaceStatusAttribute(),
	}
}

// dataInterfaceStatusAttribute is status.interfaces of the resource, for
// data sources.
func dataInterfaceStatusAttribute() schema.ListNestedAttribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return schema.ListNestedAttribute{
		Computed:    true,
		Description: "The running instance's interfaces, with their addresses; empty without a running instance.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name":        str("Name of the interface."),
			"mac_address": str("Its MAC address."),
			"ip_address":  str("Its first IP address (IPv4 when it has one); null until the node finds one."),
			"ip_addresses": schema.ListAttribute{Computed: true, ElementType: types.StringType,
				Description: "Every IP address of the interface, IPv4 first."},
			"source":         str("`lease`, `arp` or `agent`: where the addresses came from; null while there are none."),
			"info":           str("Why there is no address yet; null once there is one."),
			"interface_name": str("The interface's name inside the guest, when the guest agent says."),
		}},
	}
}

func (d *vmDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg vmModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_virtual_machine") {
		return
	}
	ns := namespaceOrDefault(cfg.Namespace)
	name := cfg.Name.ValueString()
	vm, vmi, err := getVM(ctx, d.data.client, ns, name)
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, vmKind, apiv1.Ref(ns, name),
			"(data source virtplane_virtual_machines lists the existing ones).")
		return
	}
	m, diags := vmToModel(ctx, vm, vmi, readOptions{full: true})
	d.record(ctx, resp, &m, diags)
}
