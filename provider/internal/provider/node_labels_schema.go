package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The schema of the virtplane_node_labels resource. Its descriptions are
// the documentation (tfplugindocs renders them into docs/).

func (r *nodeLabelsResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "An admin's labels on a node (`virtplane-agent node label`), which VMs' `node_selector` " +
			"match. The node's agent can neither set nor change nor remove these labels, so a VM that selects one " +
			"(`tier = \"secure\"`) runs only on the nodes an admin labelled, whatever a compromised node reports " +
			"about itself. Labels under `" + apiv1.NodeLabelPrefix + "` are the node's own (its agent reports them, " +
			"`" + apiv1.LabelKVM + "` among them) and `" + apiv1.LabelNodeName + "` is the server's: neither can be " +
			"set here. The resource owns only the keys it sets: the node's other labels, set by other resources or " +
			"by hand, are left alone. A key the node has already is taken over (its value becomes the configured " +
			"one), and destroy removes every key the resource set. A label changed or removed outside Terraform " +
			"shows as a change. `virtplane_nodes` lists a node's labels of every kind.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "The node's name, also the import ID.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"node": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "Name of the node to label, as `virtplane_nodes` lists it. Changing it " +
					"removes the labels from the old node and sets them on the new one.",
				Validators:    []validator.String{stringvalidator.LengthAtLeast(1)},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			},
			"labels": schema.MapAttribute{
				Required:    true,
				ElementType: types.StringType,
				MarkdownDescription: fmt.Sprintf("The labels to set, at least one and at most %d (a node's admin "+
					"labels together). Keys are qualified names (`example.com/name`), values at most 63 characters; "+
					"keys under `%s` and `%s` are refused at plan time. Import takes every admin label the node has.",
					validation.MaxAdminNodeLabels, apiv1.NodeLabelPrefix, apiv1.LabelNodeName),
				Validators: []validator.Map{
					mapvalidator.SizeBetween(1, validation.MaxAdminNodeLabels),
					labelMapValidator(),
					adminLabelKeysValidator(),
				},
			},
		},
	}
}
