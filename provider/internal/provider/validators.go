package provider

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/labels"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
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

// enumValidator accepts exactly one of values, case-sensitively as the
// agent does (KubeVirt's enums are case-sensitive too). A value that only
// differs in case gets a "did you mean", because "always" for "Always" is
// the typo new users make.
type enumValidator struct {
	values []string
}

var _ validator.String = enumValidator{}

func oneOf(values ...string) enumValidator { return enumValidator{values: values} }

func (v enumValidator) list() string {
	q := make([]string, len(v.values))
	for i, s := range v.values {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func (v enumValidator) Description(context.Context) string {
	return "must be one of " + v.list() + " (case-sensitive)"
}

func (v enumValidator) MarkdownDescription(context.Context) string {
	q := make([]string, len(v.values))
	for i, s := range v.values {
		q[i] = "`" + s + "`"
	}
	return "must be one of " + strings.Join(q, ", ") + " (case-sensitive)"
}

func (v enumValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	got := req.ConfigValue.ValueString()
	for _, s := range v.values {
		if got == s {
			return
		}
	}
	msg := fmt.Sprintf("%s must be one of %s (case-sensitive), got %s.", req.Path, v.list(), strconv.Quote(got))
	for _, s := range v.values {
		if strings.EqualFold(got, s) {
			msg += fmt.Sprintf(" Did you mean %q?", s)
			break
		}
	}
	resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+lastStep(req.Path), msg)
}

// lastStep names the attribute a path ends in, for diagnostic summaries.
func lastStep(p path.Path) string {
	steps := p.Steps()
	for i := len(steps) - 1; i >= 0; i-- {
		if n, ok := steps[i].(path.PathStepAttributeName); ok {
			return string(n)
		}
	}
	return p.String()
}

// dnsLabelValidator checks names the agent requires to be DNS-1123 labels
// (VM names become host names and libvirt domain names).
type dnsLabelValidator struct{}

var _ validator.String = dnsLabelValidator{}

func (dnsLabelValidator) Description(context.Context) string {
	return "must be a DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
}

func (v dnsLabelValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (dnsLabelValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if msgs := utilvalidation.IsDNS1123Label(s); len(msgs) > 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+lastStep(req.Path),
			fmt.Sprintf("%s %s is not valid: %s.", req.Path, strconv.Quote(s), strings.Join(msgs, "; ")))
	}
}

// labelMapValidator checks label maps (labels, node_selector) with the
// agent's rules, so a bad key fails the plan rather than the apply.
type labelMapValidator struct{}

var _ validator.Map = labelMapValidator{}

func (labelMapValidator) Description(context.Context) string {
	return "keys must be qualified names (`example.com/name`) and values at most 63 characters of letters, digits, '-', '_' and '.'"
}

func (v labelMapValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (labelMapValidator) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	for k, e := range req.ConfigValue.Elements() {
		if msgs := content.IsLabelKey(k); len(msgs) > 0 {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Invalid "+lastStep(req.Path)+" key",
				fmt.Sprintf("%s key %s is not valid: %s.", req.Path, strconv.Quote(k), strings.Join(msgs, "; ")))
		}
		s, ok := e.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		if msgs := content.IsLabelValue(s.ValueString()); len(msgs) > 0 {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Invalid "+lastStep(req.Path)+" value",
				fmt.Sprintf("%s[%q] = %s is not valid: %s.", req.Path, k, strconv.Quote(s.ValueString()), strings.Join(msgs, "; ")))
		}
	}
}

// annotationMapValidator checks annotation keys (qualified names, case
// ignored) and the total size, as the agent does.
type annotationMapValidator struct{}

var _ validator.Map = annotationMapValidator{}

// maxAnnotationBytes is the agent's (and Kubernetes') limit on keys plus
// values.
const maxAnnotationBytes = 256 * 1024

func (annotationMapValidator) Description(context.Context) string {
	return "keys must be qualified names (`example.com/name`); keys and values together at most 256 KiB"
}

func (v annotationMapValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (annotationMapValidator) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	total := 0
	for k, e := range req.ConfigValue.Elements() {
		if msgs := content.IsLabelKey(strings.ToLower(k)); len(msgs) > 0 {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Invalid "+lastStep(req.Path)+" key",
				fmt.Sprintf("%s key %s is not valid: %s.", req.Path, strconv.Quote(k), strings.Join(msgs, "; ")))
		}
		total += len(k)
		if s, ok := e.(types.String); ok {
			total += len(s.ValueString())
		}
	}
	if total > maxAnnotationBytes {
		resp.Diagnostics.AddAttributeError(req.Path, "Annotations too large",
			fmt.Sprintf("%s hold %d bytes of keys and values; at most %d are allowed.", req.Path, total, maxAnnotationBytes))
	}
}

// macValidator accepts unicast MAC addresses in colon notation.
type macValidator struct{}

var _ validator.String = macValidator{}

func (macValidator) Description(context.Context) string {
	return "must be a unicast MAC address such as 02:00:00:00:00:01"
}

func (v macValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (macValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	hw, err := net.ParseMAC(s)
	bad := ""
	switch {
	case err != nil || len(hw) != 6:
		bad = "must be a MAC address such as 02:00:00:00:00:01"
	case hw[0]&1 != 0:
		bad = "must be a unicast MAC address (least significant bit of the first octet clear)"
	case hw.String() == "00:00:00:00:00:00":
		bad = "must not be all zeros"
	}
	if bad != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid mac_address",
			fmt.Sprintf("%s %s %s.", req.Path, strconv.Quote(s), bad))
	}
}

// imagePathValidator applies the agent's image reference rules that do
// not depend on the node: no ".." and no NUL. Absolute paths are left to
// the agent, which accepts them inside its image directory only.
type imagePathValidator struct{}

var _ validator.String = imagePathValidator{}

func (imagePathValidator) Description(context.Context) string {
	return "must be a path relative to the node image directory (or an absolute path inside it), without `..`"
}

func (v imagePathValidator) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (imagePathValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	if filepath.IsAbs(s) {
		return // only the agent knows its image directory
	}
	addFieldErrors(resp, req.Path, s, validation.ValidateImagePath(s, field.NewPath(req.Path.String()), ""))
}
