package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The schema of the virtplane_virtual_machine_pool resource: the replica
// kinds' shared attributes (replicas_schema.go), the pool's own, and the
// VM template (template_schema.go).

// poolKindSchema words the attributes a pool shares with a replica set.
var poolKindSchema = replicaKindSchema{
	noun: "pool", replicas: "VMs", maxName: apiv1.MaxPoolNameLen,
	nameNote: "its VMs are named `<name>-<ordinal>`",
	labels:   path.Root("virtual_machine_template").AtName("labels"),
}

// poolTemplateSchema is the shared attributes and blocks as a pool's
// virtual_machine_template has them.
var poolTemplateSchema = specSchema{
	template: true,
	labels: "Labels of each VM, at least one; `selector` defaults to them. Keys are qualified names " +
		"(`app`, `example.com/tier`), values at most 63 characters.",
	annotations: "Annotations put on each VM's instance template, so every instance (VMI) carries them; " +
		"node agents and tools read them.",
}

func (r *poolResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := replicaAttributes(poolKindSchema)
	attrs["max_unavailable"] = schema.StringAttribute{
		Optional: true,
		Computed: true,
		Default:  stringdefault.StaticString(apiv1.DefaultMaxUnavailable),
		Description: "How many VMs a rollout of a template change may restart at once: a whole number from 1 " +
			"(`\"1\"`) or a percentage of `replicas` from `1%` to `100%` (`\"25%\"`, rounded up). Default " +
			"`\"100%\"` (KubeVirt's): every VM at once.",
		Validators: []validator.String{maxUnavailableValidator()},
	}
	attrs["scale_in_order"] = schema.StringAttribute{
		Optional: true,
		Computed: true,
		Default:  stringdefault.StaticString(apiv1.DefaultScaleInOrder),
		Description: "Which VMs go first when `replicas` goes down: `DescendingOrder` (default: the highest " +
			"ordinals, so a pool scaled from 5 to 3 keeps `-0` to `-2`), `AscendingOrder`, `Newest` or `Oldest` " +
			"(by creation time). A removed VM's persistent volumes go with it.",
		Validators: []validator.String{oneOf(apiv1.ScaleInOrders()...)},
	}
	statusAttrs := replicaStatusAttributes(poolKindSchema, "vm_names",
		"Names of the pool's VMs that are not being deleted, by ordinal: `<name>-0`, `<name>-1`, ...")
	statusAttrs["updated_replicas"] = schema.Int64Attribute{
		Computed:    true,
		Description: "VMs on the current template, their instance (if they run) started from it.",
	}
	attrs["status"] = schema.SingleNestedAttribute{
		Computed:    true,
		Description: "What the pool's controller last reported, read on every refresh (never waited for).",
		Attributes:  statusAttrs,
	}
	resp.Schema = schema.Schema{
		Description: "A pool of virtual machines made from one template: KubeVirt's VirtualMachinePool. Its VMs " +
			"are named <name>-0, <name>-1, ... and keep their names and persistent volumes across restarts and " +
			"template changes. Create and update wait until the pool has replicas VMs, ready and on the current " +
			"template, and fail early with the reason when a VM cannot run.",
		MarkdownDescription: "A pool of virtual machines made from one template: KubeVirt's `VirtualMachinePool`. Its " +
			"VMs are named `<name>-0`, `<name>-1`, ... and keep their names and persistent volumes across restarts " +
			"and template changes. Create and update wait until the pool has `replicas` VMs, ready and on the " +
			"current template, and fail early with the reason when a VM cannot run.",
		Attributes: attrs,
		Blocks: map[string]schema.Block{
			"virtual_machine_template": schema.SingleNestedBlock{
				Description: "What each VM is made from: the settings of `virtplane_virtual_machine`, without a " +
					"name. Required. Any change is rolled out to every VM: each running VM restarts on the new " +
					"template, at most `max_unavailable` at a time, and apply waits until all have.",
				Attributes: vmSpecAttributes(poolTemplateSchema),
				Blocks:     instanceSpecBlocks(poolTemplateSchema),
				Validators: []validator.Object{objectvalidator.IsRequired()},
			},
			"timeouts": timeoutsBlock(ctx, "Time limits of create, update and delete.", timeouts.Opts{
				Create: true, Update: true, Delete: true,
				CreateDescription: "How long create may wait for the VMs, as a Go duration (`30s`, `15m`, `1h`). " +
					"Default `10m`.",
				UpdateDescription: "How long update may take, including the rollout of a template change. Default `10m`.",
				DeleteDescription: "How long destroy may wait for the pool and its VMs to be gone. Default `10m`.",
			}),
		},
	}
}
