package provider

import (
	"context"
	"maps"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The schema of the virtplane_virtual_machine resource: the template's
// attributes and blocks (template_schema.go) and the VM's own, the
// wait_for_ip block and the computed status. Its descriptions are the
// documentation (tfplugindocs renders them into docs/).

func (r *vmResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	tb := timeoutsBlock(ctx, "Time limits of create, update and delete.", timeouts.Opts{
		Create: true, Update: true, Delete: true,
		CreateDescription: "How long create may wait for the state `run_strategy` implies, as a Go duration " +
			"(`30s`, `15m`, `1h`). Default `10m`.",
		UpdateDescription: "How long update may take, including a restart and the wait for the state " +
			"`run_strategy` implies. Default `10m`.",
		DeleteDescription: "How long destroy may wait for the VM to be gone; the guest gets " +
			"`termination_grace_period` seconds of that to shut down. Default `10m`.",
	})
	attrs := vmSpecAttributes(vmSpecSchema)
	maps.Copy(attrs, map[string]schema.Attribute{
		"id": schema.StringAttribute{
			Computed:      true,
			Description:   "`namespace/name`, also the import ID.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"name": schema.StringAttribute{
			Required: true,
			Description: "Name of the VM, unique in its namespace: a DNS-1123 label (lower-case letters, " +
				"digits and `-`, at most 63). It becomes the guest's host name and the libvirt domain " +
				"name. Changing it replaces the VM.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"namespace": schema.StringAttribute{
			Optional:      true,
			Computed:      true,
			Default:       stringdefault.StaticString(apiv1.DefaultNamespace),
			Description:   "Namespace of the VM, a DNS-1123 label. Default `default`. Changing it replaces the VM.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
		},
		"uid": schema.StringAttribute{
			Computed:      true,
			Description:   "Unique ID the agent gave the VM; a VM re-created under the same name gets a new one.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
		},
		"source_snapshot": schema.StringAttribute{
			Optional: true,
			Description: "Name of a snapshot (`virtplane_virtual_machine_snapshot`), in the VM's namespace, that the " +
				"VM's persistent volumes start from: create clones the snapshot into this VM (on the snapshot's " +
				"node, each persistent volume a copy of the snapshot's volume of the same name, new MAC addresses " +
				"for interfaces without `mac_address`), then applies this configuration and waits as for any VM. " +
				"Changing it to another snapshot replaces the VM; setting it on a VM created without it (or " +
				"imported), or removing it, only records that. Only the provider uses this setting.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: []planmodifier.String{sourceSnapshotReplace()},
		},
		"update_policy": schema.StringAttribute{
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(defaultUpdatePolicy),
			Description: "What apply does when a change only takes effect at a restart (cpu, memory, disks, " +
				"boot, interfaces, node_selector): `restart` (default) restarts a running VM and waits " +
				"for the new instance, and restarts one whose `restart_required` is true; `none` leaves " +
				"it running and sets `restart_required`. A VM with `run_strategy = \"Once\"` is never " +
				"restarted. Only the provider uses this setting.",
			Validators: []validator.String{oneOf(updatePolicies...)},
		},
		"restart_required": schema.BoolAttribute{
			Computed: true,
			Description: "Whether the running instance predates a change that needs a restart " +
				"(KubeVirt's `RestartRequired` condition).",
		},
		"status": schema.SingleNestedAttribute{
			Computed:    true,
			Description: "What the agent last reported, read on every refresh (never waited for).",
			Attributes:  statusSchemaAttributes(),
		},
	})
	blocks := instanceSpecBlocks(vmSpecSchema)
	blocks["wait_for_ip"] = waitForIPBlock()
	blocks["timeouts"] = tb
	resp.Schema = schema.Schema{
		Description: "A virtual machine: KubeVirt's VirtualMachine run by virtplane agents. run_strategy " +
			"decides whether it runs; create and update wait for the state the strategy implies and fail " +
			"early, with the reason, when the VM cannot get there (no fitting node, crash loop). A change " +
			"that only takes effect at a restart restarts the VM when update_policy is \"restart\" (the default).",
		MarkdownDescription: "A virtual machine: KubeVirt's `VirtualMachine` run by virtplane agents. `run_strategy` " +
			"decides whether it runs; create and update wait for the state the strategy implies and fail " +
			"early, with the reason, when the VM cannot get there (no fitting node, crash loop). A change " +
			"that only takes effect at a restart restarts the VM when `update_policy = \"restart\"` (the default).",
		Attributes: attrs,
		Blocks:     blocks,
	}
}

// vmSpecSchema is the shared attributes and blocks as the VM resource has
// them.
var vmSpecSchema = specSchema{
	labels: "Labels of the VM, for selecting it (data source `virtplane_virtual_machines`). " +
		"Keys are qualified names (`app`, `example.com/tier`), values at most 63 characters. " +
		"Changing them never restarts the VM.",
	annotations: "Annotations put on the VM's instance template, so every instance (VMI) of the VM " +
		"carries them; node agents and tools read them. Changes apply to the next instance and " +
		"do not restart the VM.",
}

func statusSchemaAttributes() map[string]schema.Attribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return map[string]schema.Attribute{
		"printable_status": str("KubeVirt's printable status: `Running`, `Stopped`, `Starting`, `Stopping`, " +
			"`Paused`, `Terminating`, `CrashLoopBackOff`, `ErrorUnschedulable`, ..."),
		"phase": str("Phase of the current instance (`Pending`, `Scheduling`, `Scheduled`, `Running`, " +
			"`Succeeded`, `Failed`); null when the VM has no instance."),
		"ready": schema.BoolAttribute{Computed: true, Description: "Whether the instance is running and ready."},
		"node":  str("Node the current instance is placed on; null when there is none."),
		"conditions": schema.ListNestedAttribute{
			Computed:    true,
			Description: "Conditions of the VM: `Ready`, `Failure`, `RestartRequired`, `Paused`, `PodScheduled` (placement), ...",
			NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
				"type":    str("Condition type."),
				"status":  str("`True`, `False` or `Unknown`."),
				"reason":  str("Machine-readable reason, CamelCase."),
				"message": str("Human-readable explanation."),
			}},
		},
		"interfaces": interfaceStatusAttribute(),
	}
}

func waitForIPBlock() schema.SingleNestedBlock {
	return schema.SingleNestedBlock{
		Description: "Wait, after create and after an update that (re)starts the guest or changes this block, " +
			"until an interface has an IP address in `status.interfaces`, so that outputs and other resources " +
			"can use it. The wait starts once the VM is in the state `run_strategy` implies and has a running " +
			"instance, and counts against `timeouts.create` or `timeouts.update`; on timeout apply fails with " +
			"why the node has no address yet (e.g. no DHCP lease). Refresh, plan and import never wait. " +
			"Only the provider uses this block.",
		Attributes: map[string]schema.Attribute{
			"timeout": schema.StringAttribute{
				Optional:    true,
				Description: "How long to wait for the address, as a Go duration (`90s`, `5m`). Default `5m`.",
				Validators:  []validator.String{durationValidator()},
			},
			"interface": schema.StringAttribute{
				Optional:    true,
				Description: "Name of the interface that must get an address. Default: the first `interface`.",
				Validators:  []validator.String{dnsLabelValidator()},
			},
		},
	}
}

// interfaceStatusAttribute is status.interfaces.
func interfaceStatusAttribute() schema.ListNestedAttribute {
	str := func(d string) schema.StringAttribute { return schema.StringAttribute{Computed: true, Description: d} }
	return schema.ListNestedAttribute{
		Computed: true,
		Description: "The running instance's interfaces as its node reports them, with the addresses the guest " +
			"uses; empty without a running instance.",
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"name":        str("Name of the interface."),
			"mac_address": str("Its MAC address."),
			"ip_address":  str("Its first IP address (IPv4 when it has one); null until the node finds one."),
			"ip_addresses": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "Every IP address of the interface, IPv4 first, without link-local IPv6 ones.",
			},
			"source": str("Where the addresses came from: `lease` (the libvirt network's DHCP server), `arp` " +
				"(the node's neighbour table) or `agent` (the QEMU guest agent); null while there are none."),
			"info":           str("Why there is no address yet (`no DHCP lease for 02:...`); null once there is one."),
			"interface_name": str("The interface's name inside the guest (`eth0`), when the guest agent says; else null."),
		}},
	}
}
