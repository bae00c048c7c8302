package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/objectvalidator"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The schema of the virtplane_virtual_machine_replica_set resource: the
// replica kinds' shared attributes (replicas_schema.go) and the instance
// template (template_schema.go).

// replicaSetKindSchema words the attributes a replica set shares with a
// pool.
var replicaSetKindSchema = replicaKindSchema{
	noun: "replica set", replicas: "instances", maxName: apiv1.MaxReplicaSetNameLen,
	nameNote: fmt.Sprintf("its instances are named `<name>-<%d random characters>`", apiv1.ReplicaSetSuffixLen),
	labels:   path.Root("template").AtName("labels"),
}

// replicaSetTemplateSchema is the shared attributes and blocks as a
// replica set's template has them.
var replicaSetTemplateSchema = specSchema{
	template: true,
	labels: "Labels of each instance, at least one; `selector` defaults to them. Keys are qualified names " +
		"(`app`, `example.com/tier`), values at most 63 characters.",
	annotations: "Annotations of each instance; node agents and tools read them.",
}

func (r *replicaSetResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	attrs := replicaAttributes(replicaSetKindSchema)
	attrs["status"] = schema.SingleNestedAttribute{
		Computed:    true,
		Description: "What the replica set's controller last reported, read on every refresh (never waited for).",
		Attributes: replicaStatusAttributes(replicaSetKindSchema, "instance_names",
			"Names of the replica set's instances that are not ending, by name. A failed instance is replaced by "+
				"one of another name."),
	}
	resp.Schema = schema.Schema{
		Description: "Interchangeable virtual machine instances made from one template: KubeVirt's " +
			"VirtualMachineInstanceReplicaSet. Its instances have no VM: they are named <name>-<5 random " +
			"characters>, and a failed one is replaced by a new one. Create and update wait until the replica " +
			"set has replicas ready instances, and fail early with the reason when they cannot run.",
		MarkdownDescription: "Interchangeable virtual machine instances made from one template: KubeVirt's " +
			"`VirtualMachineInstanceReplicaSet`. Its instances have no VM: they are named `<name>-<5 random " +
			"characters>`, and a failed one is replaced by a new one. Create and update wait until the replica " +
			"set has `replicas` ready instances, and fail early with the reason when they cannot run.",
		Attributes: attrs,
		Blocks: map[string]schema.Block{
			"template": schema.SingleNestedBlock{
				Description: "What each instance is made from: the instance settings of `virtplane_virtual_machine`. " +
					"Required. No `persistent` disks (an instance has no VM to keep one for: use " +
					"`virtplane_virtual_machine_pool`) and no `mac_address` (each instance gets its own). A change " +
					"applies to instances made from then on; running ones keep the template they were made from " +
					"(KubeVirt's behaviour: scale to 0 and back to replace them).",
				Attributes: instanceSpecAttributes(replicaSetTemplateSchema),
				Blocks:     instanceSpecBlocks(replicaSetTemplateSchema),
				Validators: []validator.Object{objectvalidator.IsRequired()},
			},
			"timeouts": timeoutsBlock(ctx, "Time limits of create, update and delete.", timeouts.Opts{
				Create: true, Update: true, Delete: true,
				CreateDescription: "How long create may wait for the instances, as a Go duration (`30s`, `15m`, `1h`). " +
					"Default `10m`.",
				UpdateDescription: "How long update may wait for the instances. Default `10m`.",
				DeleteDescription: "How long destroy may wait for the replica set and its instances to be gone. Default `10m`.",
			}),
		},
	}
}
