package provider

import (
	"context"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"k8s.io/apimachinery/pkg/labels"
)

// endpointValidator rejects malformed endpoints at validate time, before
// anything is dialled.
type endpointValidator struct{}

var _ validator.String = endpointValidator{}

func (endpointValidator) Description(context.Context) string {
	return "must be unix:///path/to/agent.sock, /path/to/agent.sock, host:port or https://host:port"
}

func (v endpointValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (endpointValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	// Empty means "use the environment or the default" (see resolveConfig).
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || req.ConfigValue.ValueString() == "" {
		return
	}
	if _, err := checkEndpoint(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid virtplane endpoint",
			"endpoint "+strconv.Quote(req.ConfigValue.ValueString())+": "+err.Error())
	}
}

// labelSelectorValidator parses selectors with the same library as the
// agent, so a typo fails at plan time with the attribute highlighted.
type labelSelectorValidator struct{}

var _ validator.String = labelSelectorValidator{}

func (labelSelectorValidator) Description(context.Context) string {
	return "must be a label selector such as `zone=a,gpu!=true` or `tier in (db,web)`"
}

func (v labelSelectorValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (labelSelectorValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := labels.Parse(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid label_selector",
			"label_selector "+strconv.Quote(req.ConfigValue.ValueString())+" is not a valid label selector: "+err.Error())
	}
}
