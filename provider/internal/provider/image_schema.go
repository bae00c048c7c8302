package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The schema of the virtplane_image resource. Its descriptions are the
// documentation (tfplugindocs renders them into docs/).

func (r *imageResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	tb := timeoutsBlock(ctx, "Time limits of create and update.", timeouts.Opts{
		Create: true, Update: true,
		CreateDescription: "How long create may wait for every node to pull the image (with `nodes = \"all\"` " +
			"and `wait_for_nodes`), as a Go duration (`30s`, `15m`, `1h`). Default `20m`.",
		UpdateDescription: "How long update may wait for every node to pull the image after `nodes` became " +
			"`\"all\"`. Default `20m`.",
	})
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A disk image (or kernel) that nodes download by URL into their image directory, " +
			"under the image's `name`: KubeVirt CDI's HTTP import. VM disks name it like any image on the node " +
			"(`image = virtplane_image.debian.name`). With `nodes = \"all\"` every node pulls it at once and " +
			"create waits until every ready, schedulable node has it (`wait_for_nodes`), failing with the " +
			"node's reason (a checksum mismatch, an unreachable URL); otherwise a node pulls it when an " +
			"instance placed there needs it. The source (`url`, `sha256`, `format`) cannot change: changing " +
			"it replaces the image, which the agent refuses while a VM uses it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{
				Computed:            true,
				MarkdownDescription: "The image's name, also the import ID.",
				PlanModifiers:       []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"name": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "Name of the image and of the file nodes store it as, which VM disks " +
					"name: a DNS-1123 subdomain (lower-case letters, digits, `-` and `.`) such as " +
					"`debian-12.qcow2`. Changing it replaces the image.",
				Validators:    []validator.String{imageNameValidator()},
				PlanModifiers: replace,
			},
			"url": schema.StringAttribute{
				Required: true,
				MarkdownDescription: "Where nodes download it: `https://`, `http://` (then set `sha256`: " +
					"nothing else protects the download) or `file:///path` (a path on each node). Every " +
					"node and reader of the image sees it, so it must not hold credentials. Changing it " +
					"replaces the image.",
				Validators:    []validator.String{imageURLValidator()},
				PlanModifiers: replace,
			},
			"sha256": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "SHA-256 (64 hex digits, either case) the download must have; a node " +
					"that gets anything else keeps nothing and reports the mismatch. Unset, each node " +
					"reports what it got in `node_status`. Changing it (other than its case) replaces " +
					"the image.",
				Validators:    []validator.String{sha256Validator()},
				PlanModifiers: []planmodifier.String{sha256KeepState(), stringplanmodifier.RequiresReplace()},
			},
			"format": schema.StringAttribute{
				Optional: true,
				MarkdownDescription: "`qcow2` or `raw`, which the download must be. Unset, it comes from " +
					"the name's extension (`.qcow2`, `.raw`), else from what `qemu-img` detects " +
					"(`node_status` shows it). Changing it replaces the image.",
				Validators:    []validator.String{oneOf(validation.ImageFormatQCOW2, validation.ImageFormatRaw)},
				PlanModifiers: replace,
			},
			"nodes": schema.StringAttribute{
				Optional: true,
				Computed: true,
				Default:  stringdefault.StaticString(validation.ImageNodesOnDemand),
				MarkdownDescription: "Which nodes pull it: `\"\"` (the default: on demand, a node pulls it " +
					"when an instance placed there needs it, and the instance waits) or `\"all\"` (every " +
					"node now, and nodes that join later). Changes in place.",
				Validators: []validator.String{oneOf(validation.ImageNodesOnDemand, validation.ImageNodesAll)},
			},
			"max_size": schema.StringAttribute{
				Optional:   true,
				Computed:   true,
				CustomType: quantityType{},
				MarkdownDescription: "The most a node downloads of the image, as a quantity (`20Gi`): a download " +
					"that grows past it is stopped, nothing of it is kept, and the node does not try again until " +
					"`max_size` (or the agent's limits) change. Unset, the agent's default (`serve " +
					"--image-max-size`, `10Gi` unless the operator changed it); at most the agent's cap " +
					"(`--image-max-size-cap`, `100Gi` by default). Changes in place.",
				Validators:    []validator.String{quantityRange("", "1Ei")},
				PlanModifiers: []planmodifier.String{quantityKeepState(), stringplanmodifier.UseStateForUnknown()},
			},
			"labels": schema.MapAttribute{
				Optional:            true,
				ElementType:         types.StringType,
				MarkdownDescription: "Labels of the image. Changes in place.",
				Validators:          []validator.Map{labelMapValidator()},
			},
			"wait_for_nodes": schema.BoolAttribute{
				Optional: true,
				Computed: true,
				Default:  booldefault.StaticBool(true),
				MarkdownDescription: "With `nodes = \"all\"`: whether create (and an update to `\"all\"`) " +
					"waits until every ready, schedulable node has pulled the image, and fails when one " +
					"reports a failure. Default `true`. Images pulled on demand are never waited for: " +
					"the VM that needs one waits instead. Only the provider uses this setting.",
			},
			"uid": schema.StringAttribute{
				Computed: true,
				MarkdownDescription: "Unique ID the agent gave the image; an image re-created under the " +
					"same name gets a new one (and nodes pull it again).",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()},
			},
			"node_status": schema.ListNestedAttribute{
				Computed: true,
				MarkdownDescription: "What each node that pulled, is pulling or failed to pull the image " +
					"last reported, sorted by node; read on every refresh.",
				NestedObject: schema.NestedAttributeObject{Attributes: imageNodeStatusResourceAttributes()},
			},
		},
		Blocks: map[string]schema.Block{"timeouts": tb},
	}
}

// imageNodeStatusDescriptions describe node_status's attributes, for the
// resource and the data source.
var imageNodeStatusDescriptions = map[string]string{
	"node": "Node name.",
	"phase": "`Pulling`, `Ready` or `Failed` (the node tries again later, except when the download " +
		"went past `max_size` or the agent's limits: then not until they change).",
	"sha256":             "SHA-256 of the image as the node verified it; null until `Ready`.",
	"format":             "Format of the image as the node verified it (`qcow2`, `raw`); null until `Ready`.",
	"virtual_size_bytes": "Size the guest sees, in bytes (`Ready` only): a persistent disk copied from the image must be at least this large.",
	"size_bytes":         "Size of the file on the node, in bytes (`Ready` only).",
	"bytes_done":         "Bytes downloaded so far.",
	"bytes_total":        "Bytes to download, when the server said; else 0.",
	"message":            "What the pull is doing, or why it failed.",
}

func imageNodeStatusResourceAttributes() map[string]schema.Attribute {
	out := map[string]schema.Attribute{}
	for name, t := range imageNodeStatusAttrTypes {
		desc := imageNodeStatusDescriptions[name]
		if t == types.Int64Type {
			out[name] = schema.Int64Attribute{Computed: true, MarkdownDescription: desc}
		} else {
			out[name] = schema.StringAttribute{Computed: true, MarkdownDescription: desc}
		}
	}
	return out
}
