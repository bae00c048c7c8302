package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagewait"
)

// The conversions between the virtplane_image model and the Image API
// object. The schema is the API's, flattened: metadata.name and
// metadata.labels, spec's source and pull policy, and the per-node pull
// status.

// imageFromModel builds the Image the configuration asks for. All values
// must be known (apply time); unset optional ones stay empty, which the
// API reads as "from the name" (format) and "on demand" (nodes).
func imageFromModel(ctx context.Context, m *imageModel) (*apiv1.Image, diag.Diagnostics) {
	var diags diag.Diagnostics
	img := &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: m.Name.ValueString(), Labels: stringMap(ctx, m.Labels, &diags)},
		Spec: &apiv1.ImageSpec{
			Url: m.URL.ValueString(),
			// The agent stores the checksum in lower case; sending it so
			// keeps the request and the stored object alike.
			Sha256: strings.ToLower(m.SHA256.ValueString()),
			Format: m.Format.ValueString(),
			Nodes:  m.Nodes.ValueString(),
			// Unknown (unset at create) is empty: the agent's default.
			MaxSize: m.MaxSize.ValueString(),
		},
	}
	return img, diags
}

// imageToModel renders img as the model. prior (the plan or the previous
// state; nil for data sources and imports) keeps the user's spelling of
// what the agent normalised: the checksum's case, and an empty labels map
// as written. full (data sources) gives empty maps rather than null.
func imageToModel(img *apiv1.Image, prior *imageModel, full bool) (imageModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	meta, spec := img.GetMetadata(), img.GetSpec()
	priorLabels := types.MapNull(types.StringType)
	var priorSum string
	if prior != nil {
		priorLabels = prior.Labels
		priorSum = prior.SHA256.ValueString()
	}
	m := imageModel{
		ID:     types.StringValue(meta.GetName()),
		Name:   types.StringValue(meta.GetName()),
		URL:    types.StringValue(spec.GetUrl()),
		SHA256: optString(spec.GetSha256()),
		Format: optString(spec.GetFormat()),
		Nodes:  types.StringValue(spec.GetNodes()),
		// The user's spelling of the same quantity is kept by the type's
		// semantic equality.
		MaxSize: quantityValue{StringValue: optString(spec.GetMaxSize())},
		Labels:  mapFromAPI(meta.GetLabels(), priorLabels, full, &diags),
		UID:     types.StringValue(meta.GetUid()),
	}
	// The checksum is case-insensitive: the user's spelling of the same
	// digits is kept, so an upper-case sha256 in the configuration is
	// never a change.
	if priorSum != "" && strings.EqualFold(priorSum, spec.GetSha256()) {
		m.SHA256 = types.StringValue(priorSum)
	}
	m.NodeStatus = imageNodeStatusList(img, &diags)
	return m, diags
}

// imageNodeStatusList renders the nodes' reports about this Image (entries
// about an earlier Image of the same name are left out), sorted by node.
func imageNodeStatusList(img *apiv1.Image, diags *diag.Diagnostics) types.List {
	entries := imagewait.Entries(img)
	elems := make([]attr.Value, 0, len(entries))
	for _, e := range entries {
		obj, d := types.ObjectValue(imageNodeStatusAttrTypes, map[string]attr.Value{
			"node":               types.StringValue(e.GetNode()),
			"phase":              types.StringValue(e.GetPhase()),
			"sha256":             optString(e.GetSha256()),
			"format":             optString(e.GetFormat()),
			"virtual_size_bytes": types.Int64Value(e.GetVirtualSizeBytes()),
			"size_bytes":         types.Int64Value(e.GetSizeBytes()),
			"bytes_done":         types.Int64Value(e.GetBytesDone()),
			"bytes_total":        types.Int64Value(e.GetBytesTotal()),
			"message":            optString(e.GetMessage()),
		})
		diags.Append(d...)
		elems = append(elems, obj)
	}
	l, d := types.ListValue(imageNodeStatusType, elems)
	diags.Append(d...)
	return l
}

// mergeImage applies what may change in place (labels, the pull policy
// and max_size) onto the stored Image, keeping what Terraform does not manage
// (annotations) and the immutable source.
func mergeImage(cur, want *apiv1.Image) *apiv1.Image {
	next := proto.Clone(cur).(*apiv1.Image)
	if next.Metadata == nil {
		next.Metadata = &apiv1.ObjectMeta{}
	}
	if next.Spec == nil {
		next.Spec = &apiv1.ImageSpec{}
	}
	next.Metadata.Labels = want.GetMetadata().GetLabels()
	next.Spec.Nodes = want.GetSpec().GetNodes()
	if ms := want.GetSpec().GetMaxSize(); ms != "" {
		next.Spec.MaxSize = ms
	}
	return next
}
