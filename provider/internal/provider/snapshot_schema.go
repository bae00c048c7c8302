package provider

import (
	"context"

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

// The schema of the virtplane_virtual_machine_snapshot resource. Its
// descriptions are the documentation (tfplugindocs renders them into
// docs/).

// defaultFailureDeadline is the API's default (300 s) as the schema
// spells it.
const defaultFailureDeadline = "5m"

// snapshotComputedDescriptions words the computed attributes; the data
// source uses them too.
var snapshotComputedDescriptions = map[string]string{
	"id":  "`namespace/name`, also the import ID.",
	"uid": "Unique ID the agent gave the snapshot.",
	"phase": "`InProgress`, `Succeeded`, `Failed` or `Deleting`. A snapshot in the state is `Succeeded`: create " +
		"waits for that.",
	"ready_to_use":  "Whether the snapshot's data is complete and can be restored from.",
	"creation_time": "When the point in time was taken (RFC 3339); null until it is.",
	"indications": "How it was taken: `Online` (the VM ran), then `GuestAgent` (the guest's file systems were " +
		"frozen), `NoGuestAgent` or `Paused`; empty for an offline snapshot.",
	"included_volumes": "The persistent volumes whose data the snapshot holds.",
	"excluded_volumes": "Volumes left out: image volumes and cloud-init seeds (made again from the spec), and " +
		"persistent volumes never provisioned (the VM never ran).",
	"node_name":    "The node whose disk holds the snapshot's data; a VM restored from it runs there.",
	"content_name": "The snapshot's VirtualMachineSnapshotContent, the record of its data.",
}

func (r *snapshotResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	attrs := map[string]schema.Attribute{
		"name": schema.StringAttribute{
			Required:      true,
			Description:   "Name of the snapshot, unique in its namespace: a DNS-1123 label. Changing it replaces the snapshot.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: replace,
		},
		"namespace": schema.StringAttribute{
			Optional:      true,
			Computed:      true,
			Default:       stringdefault.StaticString(apiv1.DefaultNamespace),
			Description:   "Namespace of the snapshot and its VM. Default `default`. Changing it replaces the snapshot.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: replace,
		},
		"virtual_machine": schema.StringAttribute{
			Required: true,
			Description: "Name of the VM to snapshot, in the snapshot's namespace. It may run (an online snapshot: " +
				"the guest keeps running) or be stopped. Changing it replaces the snapshot.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: replace,
		},
		"deletion_policy": schema.StringAttribute{
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(apiv1.DeletionPolicyDelete),
			Description: "What destroying the snapshot does with its data: `Delete` (default) removes it from the " +
				"node; `Retain` keeps its content record and data. Changing it replaces the snapshot.",
			Validators:    []validator.String{oneOf(apiv1.DeletionPolicyDelete, apiv1.DeletionPolicyRetain)},
			PlanModifiers: replace,
		},
		"failure_deadline": schema.StringAttribute{
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(defaultFailureDeadline),
			Description: "How long the snapshot may take before it fails (\"snapshot deadline exceeded\"), as a Go " +
				"duration in whole seconds (`90s`, `5m`, `1h`); `0s` never fails. Default `5m` (KubeVirt's). " +
				"`300s` and `5m` are the same and never show as a change. Changing it replaces the snapshot.",
			Validators: []validator.String{failureDeadlineValidator()},
			PlanModifiers: []planmodifier.String{
				keepEquivalentState{describedAs: "the same duration in another spelling is not a change", equivalent: sameDeadline},
				stringplanmodifier.RequiresReplace(),
			},
		},
	}
	for name, desc := range snapshotComputedDescriptions {
		keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
		switch name {
		case "ready_to_use":
			attrs[name] = schema.BoolAttribute{Computed: true, Description: desc}
		case "indications", "included_volumes", "excluded_volumes":
			attrs[name] = schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: desc}
		default:
			attrs[name] = schema.StringAttribute{Computed: true, Description: desc, PlanModifiers: keep}
		}
	}
	resp.Schema = schema.Schema{
		Description: "A snapshot of a virtual machine: KubeVirt's VirtualMachineSnapshot. It holds the VM's spec " +
			"and a copy of each of its persistent volumes, on the node that has them; image volumes and cloud-init " +
			"seeds are not copied (the spec brings them back). Create waits until the snapshot has succeeded; a " +
			"snapshot that fails is deleted again and the error reported. Restore it with " +
			"virtplane_virtual_machine_restore, or start a new VM from it with virtplane_virtual_machine's source_snapshot.",
		MarkdownDescription: "A snapshot of a virtual machine: KubeVirt's `VirtualMachineSnapshot`. It holds the VM's " +
			"spec and a copy of each of its persistent volumes, on the node that has them; image volumes and " +
			"cloud-init seeds are not copied (the spec brings them back). Create waits until the snapshot has " +
			"succeeded; a snapshot that fails is deleted again and the error reported. Restore it with " +
			"`virtplane_virtual_machine_restore`, or start a new VM from it with `virtplane_virtual_machine`'s " +
			"`source_snapshot`.",
		Attributes: attrs,
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, "Time limits of create and delete.", timeouts.Opts{
				Create: true, Delete: true,
				CreateDescription: "How long create may wait for the snapshot to succeed, as a Go duration (`30s`, " +
					"`15m`). Default `10m`; the snapshot's own `failure_deadline` usually ends it first.",
				DeleteDescription: "How long destroy may wait for the snapshot and (with `deletion_policy = " +
					"\"Delete\"`) its data to be gone. Default `10m`.",
			}),
		},
	}
}
