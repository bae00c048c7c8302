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

// The schema of the virtplane_virtual_machine_restore resource. Its
// descriptions are the documentation (tfplugindocs renders them into
// docs/).

func (r *restoreResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		Description: "Restores a virtual machine from a snapshot: KubeVirt's VirtualMachineRestore. The restore is an " +
			"event, as KubeVirt's object is: creating this resource restores the VM once (its spec and the data of its " +
			"persistent volumes become the snapshot's) and destroying it deletes only the record; the VM stays " +
			"restored. (An attribute of the VM would restore again, or drift, on every plan.) The VM must be stopped " +
			"(run_strategy Halted) unless target_readiness_policy is StopTarget.",
		MarkdownDescription: "Restores a virtual machine from a snapshot: KubeVirt's `VirtualMachineRestore`.\n\n" +
			"A restore is an **event**, as KubeVirt's object is: creating this resource restores the VM once (its spec " +
			"and the data of its persistent volumes become the snapshot's) and destroying it deletes only the record; " +
			"the VM stays restored. It is a resource of its own rather than an attribute of " +
			"`virtplane_virtual_machine`, which would restore again, or drift, on every plan. To restore again, " +
			"replace it (`terraform apply -replace=...`) or create another.\n\n" +
			"The VM must be **stopped** (`run_strategy = \"Halted\"`), or `target_readiness_policy = \"StopTarget\"` " +
			"stops it. Create waits until the restore is complete; the VM keeps its run strategy, so a VM that " +
			"was stopped for the restore stays stopped until its `run_strategy` says otherwise. A restore that " +
			"fails leaves the VM exactly as it was, is deleted again, and its error is reported. A " +
			"`virtplane_virtual_machine` managing the restored VM sees the snapshot's spec on its next plan and " +
			"plans it back to its configuration: restore into VMs whose configuration matches the snapshot's, " +
			"or start a new VM from a snapshot with `virtplane_virtual_machine`'s `source_snapshot`.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed: true, Description: "`namespace/name`, also the import ID.", PlanModifiers: keep,
			},
			"name": schema.StringAttribute{
				Required:      true,
				Description:   "Name of the restore record, unique in its namespace: a DNS-1123 label. Changing it restores again.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: replace,
			},
			"namespace": schema.StringAttribute{
				Optional:      true,
				Computed:      true,
				Default:       stringdefault.StaticString(apiv1.DefaultNamespace),
				Description:   "Namespace of the restore, its VM and its snapshot. Default `default`. Changing it restores again.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: replace,
			},
			"virtual_machine": schema.StringAttribute{
				Required: true,
				Description: "Name of the VM to restore: the snapshot's own VM, whose volumes are on the snapshot's node. " +
					"Changing it restores again.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: replace,
			},
			"snapshot": schema.StringAttribute{
				Required:      true,
				Description:   "Name of the snapshot to restore, in the same namespace; it must have succeeded. Changing it restores again.",
				Validators:    []validator.String{dnsLabelValidator()},
				PlanModifiers: replace,
			},
			"target_readiness_policy": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(apiv1.ReadinessWaitGracePeriod),
				Description: "What happens when the VM runs: `WaitGracePeriod` (default: wait up to 5 minutes for it to be " +
					"stopped, then fail), `StopTarget` (stop it), `FailImmediate` (fail at once) or `WaitEventually` (wait " +
					"until create's timeout). Changing it restores again.",
				Validators:    []validator.String{oneOf(apiv1.ReadinessWaitGracePeriod, apiv1.ReadinessStopTarget, apiv1.ReadinessFailImmediate, apiv1.ReadinessWaitEventually)},
				PlanModifiers: replace,
			},
			"uid": schema.StringAttribute{
				Computed: true, Description: "Unique ID the agent gave the restore.", PlanModifiers: keep,
			},
			"phase": schema.StringAttribute{
				Computed: true, PlanModifiers: keep,
				Description: "`Pending`, `Staging`, `Committing`, `Succeeded` or `Failed`; `Succeeded` once create returns.",
			},
			"complete": schema.BoolAttribute{Computed: true, Description: "Whether the restore is done."},
			"restore_time": schema.StringAttribute{
				Computed: true, Description: "When the restore completed (RFC 3339).", PlanModifiers: keep,
			},
			"restored_volumes": schema.ListAttribute{
				Computed: true, ElementType: types.StringType,
				Description: "The persistent volumes whose data was replaced by the snapshot's.",
			},
		},
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, "Time limits of create and delete.", timeouts.Opts{
				Create: true, Delete: true,
				CreateDescription: "How long create may wait for the restore to complete, as a Go duration (`30s`, " +
					"`15m`). Default `10m`.",
				DeleteDescription: "How long destroy may wait for the record to be gone. Default `10m`.",
			}),
		},
	}
}
