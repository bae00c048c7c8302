package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The virtplane_node_labels resource: an admin's labels on a node (as
// `virtplane-agent node label` sets them), which VMs' node selectors can
// trust: the node's agent can neither set nor change nor remove them. It
// owns the keys it sets and leaves the node's other labels alone. Its
// parts are in node_labels_*.go, as the package doc says; its validator,
// model and errors, short, are here.

var (
	_ resource.Resource                = (*nodeLabelsResource)(nil)
	_ resource.ResourceWithConfigure   = (*nodeLabelsResource)(nil)
	_ resource.ResourceWithImportState = (*nodeLabelsResource)(nil)
)

// NewNodeLabelsResource returns the virtplane_node_labels resource.
func NewNodeLabelsResource() resource.Resource {
	return &nodeLabelsResource{configuredResource{kind: nodeLabelsKind}}
}

type nodeLabelsResource struct {
	configuredResource
}

func (r *nodeLabelsResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_node_labels"
}

// ImportState adopts a node's labels by the node's name: Read, finding no
// labels in the state, takes every admin label the node has.
func (r *nodeLabelsResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importNode(ctx, req, resp, "a node's labels")
}

// adminLabelKeysValidator refuses, at plan time, the keys an admin cannot
// set: the node's own (node.virtplane.io/) and the server's
// (virtplane.io/node-name), with the agent's own rule.
func adminLabelKeysValidator() validator.Map {
	return mapCheck{
		describedAs: describedAs("keys must not be under " + apiv1.NodeLabelPrefix + " (the node's own) nor " + apiv1.LabelNodeName),
		check: func(p path.Path, elems map[string]attr.Value, diags *diag.Diagnostics) {
			for k := range elems {
				for _, e := range validation.ValidateAdminNodeLabelKey(k, field.NewPath("labels").Key(k)) {
					if e.Type == field.ErrorTypeForbidden { // syntax is labelMapValidator's
						diags.AddAttributeError(p.AtMapKey(k), "Invalid "+lastStep(p)+" key",
							fmt.Sprintf("%s key %s cannot be set: %s.", p, strconv.Quote(k), e.Detail))
					}
				}
			}
		},
	}
}

// The virtplane_node_labels model.

type nodeLabelsModel struct {
	ID     types.String `tfsdk:"id"`
	Node   types.String `tfsdk:"node"`
	Labels types.Map    `tfsdk:"labels"`
}

// How virtplane_node_labels words what goes wrong.

// nodeLabelsKind words the diagnostics about node labels.
var nodeLabelsKind = objectKind{noun: "node labels", title: "Node", one: "a node", short: "node",
	logKey: "node", importID: "NODE", attribute: nodeLabelsAttributePath}

// nodeLabelsAttributePath maps the field paths of a Label request's
// errors to the attributes: name is node, set[key] and remove[i] are
// labels (set[key] its element), metadata.labels is labels.
func nodeLabelsAttributePath(fieldPath string) (path.Path, bool) {
	switch norm, args := normalizeFieldPath(fieldPath); {
	case norm == "name":
		return path.Root("node"), true
	case norm == "set[*]" && len(args) == 1:
		return path.Root("labels").AtMapKey(args[0]), true
	case norm == "set", strings.HasPrefix(norm, "remove"), norm == "metadata.labels":
		return path.Root("labels"), true
	}
	return path.Empty(), false
}
