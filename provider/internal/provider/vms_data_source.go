package provider

import (
	"context"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The virtplane_virtual_machines data source: the VMs a filter selects,
// summarised.

var (
	_ datasource.DataSource              = (*vmsDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*vmsDataSource)(nil)
)

// NewVMsDataSource returns the virtplane_virtual_machines data source.
func NewVMsDataSource() datasource.DataSource { return &vmsDataSource{} }

type vmsDataSource struct {
	configuredDataSource
}

type vmsDataSourceModel struct {
	ID              types.String     `tfsdk:"id"`
	Namespace       types.String     `tfsdk:"namespace"`
	LabelSelector   types.String     `tfsdk:"label_selector"`
	PrintableStatus types.String     `tfsdk:"printable_status"`
	VirtualMachines []vmSummaryModel `tfsdk:"virtual_machines"`
}

type vmSummaryModel struct {
	ID              types.String      `tfsdk:"id"`
	Namespace       types.String      `tfsdk:"namespace"`
	Name            types.String      `tfsdk:"name"`
	UID             types.String      `tfsdk:"uid"`
	RunStrategy     types.String      `tfsdk:"run_strategy"`
	PrintableStatus types.String      `tfsdk:"printable_status"`
	Ready           types.Bool        `tfsdk:"ready"`
	Node            types.String      `tfsdk:"node"`
	Labels          map[string]string `tfsdk:"labels"`
	Interfaces      types.List        `tfsdk:"interfaces"`
}

func (d *vmsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machines"
}

func (d *vmsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	resp.Schema = schema.Schema{
		Description: "Lists virtual machines with their run strategy and status, optionally filtered by " +
			"namespace, labels and printable status. One call to the agent for the VMs and one for their " +
			"instances, whatever the number of VMs.",
		Attributes: map[string]schema.Attribute{
			"id": str("The filters in canonical form (`namespace=...;label_selector=...;printable_status=...`; `*` for none)."),
			"namespace": schema.StringAttribute{
				Optional:    true,
				Description: "Only list VMs in this namespace; unset lists every namespace.",
				Validators:  []validator.String{dnsLabelValidator()},
			},
			"label_selector": schema.StringAttribute{
				Optional: true,
				Description: "Only list VMs whose labels match this selector, in Kubernetes syntax: `app=web`, " +
					"`tier in (db,web)`, `!canary`, comma-separated for AND.",
				Validators: []validator.String{labelSelectorValidator()},
			},
			"printable_status": schema.StringAttribute{
				Optional:    true,
				Description: "Only list VMs with this printable status, e.g. `Running`, `Stopped` or `CrashLoopBackOff` (case-sensitive).",
				Validators:  []validator.String{oneOf(apiv1.PrintableStatuses()...)},
			},
			"virtual_machines": schema.ListNestedAttribute{
				Computed:    true,
				Description: "The matching VMs, sorted by namespace and name.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"id":               str("`namespace/name`, the import ID of `virtplane_virtual_machine`."),
					"namespace":        str("Namespace."),
					"name":             str("Name."),
					"uid":              str("Unique ID the agent gave the VM."),
					"run_strategy":     str("`Always`, `RerunOnFailure`, `Manual`, `Halted` or `Once`."),
					"printable_status": str("KubeVirt's printable status (`Running`, `Stopped`, ...); null before the VM controller first saw the VM."),
					"ready":            schema.BoolAttribute{Computed: true, Description: "Whether the VM's instance is running and ready."},
					"node":             str("Node of the VM's current instance; null when it has none."),
					"labels": schema.MapAttribute{
						Computed: true, ElementType: types.StringType,
						Description: "Labels of the VM; empty when it has none.",
					},
					"interfaces": dataInterfaceStatusAttribute(),
				}},
			},
		},
	}
}

func (d *vmsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m vmsDataSourceModel
	if !d.readConfig(ctx, req, resp, &m, "read virtplane_virtual_machines") {
		return
	}
	opts := &apiv1.ListOptions{Namespace: m.Namespace.ValueString(), LabelSelector: m.LabelSelector.ValueString()}
	// Paged: one response of every VM would pass gRPC's 4 MiB message
	// limit at tens of thousands of VMs.
	vms, _, err := client.ListAll(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListVirtualMachinesResponse, error) {
		return d.data.client.VMs.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: o})
	})
	if err != nil {
		addListError(&resp.Diagnostics, err, d.data.endpoint, m.LabelSelector, "list virtual machines")
		return
	}
	// Instances carry the node; they share their VM's name and namespace,
	// and listing them by namespace only keeps this to two calls.
	vmis, _, err := client.ListAll(ctx, &apiv1.ListOptions{Namespace: m.Namespace.ValueString()}, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListVirtualMachineInstancesResponse, error) {
		return d.data.client.VMIs.List(ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: o})
	})
	if err != nil {
		resp.Diagnostics.AddError(apiError(err, d.data.endpoint, "list virtual machine instances"))
		return
	}
	m.ID = types.StringValue(vmsFilterID(m))
	m.VirtualMachines = vmSummaries(vms, vmis, m.PrintableStatus.ValueString(), &resp.Diagnostics)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// vmsFilterID renders the filters canonically; "*" when there are none.
func vmsFilterID(m vmsDataSourceModel) string {
	var parts []string
	if ns := m.Namespace.ValueString(); ns != "" {
		parts = append(parts, "namespace="+ns)
	}
	if sel := m.LabelSelector.ValueString(); sel != "" {
		if id := selectorID(sel); id != allNodesID {
			parts = append(parts, "label_selector="+id)
		}
	}
	if ps := m.PrintableStatus.ValueString(); ps != "" {
		parts = append(parts, "printable_status="+ps)
	}
	if len(parts) == 0 {
		return "*"
	}
	return strings.Join(parts, ";")
}

// vmSummaries joins VMs with their instances, filters by printable status
// ("" keeps all) and sorts by namespace and name.
func vmSummaries(vms []*apiv1.VirtualMachine, vmis []*apiv1.VirtualMachineInstance, printable string, diags *diag.Diagnostics) []vmSummaryModel {
	instances := map[string]*apiv1.VirtualMachineInstance{}
	for _, vmi := range vmis {
		md := vmi.GetMetadata()
		instances[apiv1.Ref(md.GetNamespace(), md.GetName())] = vmi
	}
	out := make([]vmSummaryModel, 0, len(vms))
	for _, vm := range vms {
		md := vm.GetMetadata()
		st := vm.GetStatus()
		if printable != "" && st.GetPrintableStatus() != printable {
			continue
		}
		id := apiv1.Ref(md.GetNamespace(), md.GetName())
		vmi := instances[id]
		if !apiv1.IsControlledBy(vmi, vm) {
			vmi = nil // an earlier VM's of the same name
		}
		s := vmSummaryModel{
			ID:              types.StringValue(id),
			Namespace:       types.StringValue(md.GetNamespace()),
			Name:            types.StringValue(md.GetName()),
			UID:             types.StringValue(md.GetUid()),
			RunStrategy:     types.StringValue(runStrategyOf(vm.GetSpec())),
			PrintableStatus: optString(st.GetPrintableStatus()),
			Ready:           types.BoolValue(st.GetReady()),
			Node:            optString(vmi.GetStatus().GetNodeName()),
			Labels:          map[string]string{},
			Interfaces:      interfaceStatusList(vmi, diags),
		}
		for k, v := range md.GetLabels() {
			s.Labels[k] = v
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Namespace.ValueString() != b.Namespace.ValueString() {
			return a.Namespace.ValueString() < b.Namespace.ValueString()
		}
		return a.Name.ValueString() < b.Name.ValueString()
	})
	return out
}
