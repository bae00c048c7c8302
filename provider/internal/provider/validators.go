package provider

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/labels"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// describedAs gives a validator or plan modifier its description: plain
// text, which reads as Markdown too.
type describedAs string

func (d describedAs) Description(context.Context) string { return string(d) }

func (d describedAs) MarkdownDescription(context.Context) string { return string(d) }

// stringCheck is a validator.String made of a description and a check of
// known, non-null values: what the provider's own string validators have
// in common. Unknown values are checked once they are known.
type stringCheck struct {
	describedAs
	check func(p path.Path, s string, diags *diag.Diagnostics)
}

var _ validator.String = stringCheck{}

func (v stringCheck) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	v.check(req.Path, req.ConfigValue.ValueString(), &resp.Diagnostics)
}

// mapCheck is stringCheck for map attributes: check sees the elements of
// a known, non-null map.
type mapCheck struct {
	describedAs
	check func(p path.Path, elems map[string]attr.Value, diags *diag.Diagnostics)
}

var _ validator.Map = mapCheck{}

func (v mapCheck) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	v.check(req.Path, req.ConfigValue.Elements(), &resp.Diagnostics)
}

// endpointValidator rejects malformed endpoints at validate time, before
// anything is dialled.
func endpointValidator() validator.String {
	return stringCheck{
		describedAs: "must be unix:///path/to/agent.sock, /path/to/agent.sock, host:port or https://host:port",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			// Empty means "use the environment or the default" (see resolveConfig).
			if s == "" {
				return
			}
			if _, err := checkEndpoint(s); err != nil {
				diags.AddAttributeError(p, "Invalid virtplane endpoint", "endpoint "+strconv.Quote(s)+": "+err.Error())
			}
		},
	}
}

// labelSelectorValidator parses selectors with the same library as the
// agent, so a typo fails at plan time with the attribute highlighted.
func labelSelectorValidator() validator.String {
	return stringCheck{
		describedAs: "must be a label selector such as `zone=a,gpu!=true` or `tier in (db,web)`",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if _, err := labels.Parse(s); err != nil {
				diags.AddAttributeError(p, "Invalid label_selector",
					"label_selector "+strconv.Quote(s)+" is not a valid label selector: "+err.Error())
			}
		},
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
func dnsLabelValidator() validator.String {
	return stringCheck{
		describedAs: "must be a DNS-1123 label: at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if msgs := utilvalidation.IsDNS1123Label(s); len(msgs) > 0 {
				diags.AddAttributeError(p, "Invalid "+lastStep(p),
					fmt.Sprintf("%s %s is not valid: %s.", p, strconv.Quote(s), strings.Join(msgs, "; ")))
			}
		},
	}
}

// labelMapValidator checks label maps (labels, node_selector) with the
// agent's rules, so a bad key fails the plan rather than the apply.
func labelMapValidator() validator.Map {
	return mapCheck{
		describedAs: "keys must be qualified names (`example.com/name`) and values at most 63 characters of letters, digits, '-', '_' and '.'",
		check: func(p path.Path, elems map[string]attr.Value, diags *diag.Diagnostics) {
			for k, e := range elems {
				if msgs := content.IsLabelKey(k); len(msgs) > 0 {
					addBadKey(diags, p, k, msgs)
				}
				s, ok := e.(types.String)
				if !ok || s.IsNull() || s.IsUnknown() {
					continue
				}
				if msgs := content.IsLabelValue(s.ValueString()); len(msgs) > 0 {
					diags.AddAttributeError(p.AtMapKey(k), "Invalid "+lastStep(p)+" value",
						fmt.Sprintf("%s[%q] = %s is not valid: %s.", p, k, strconv.Quote(s.ValueString()), strings.Join(msgs, "; ")))
				}
			}
		},
	}
}

// maxAnnotationBytes is the agent's (and Kubernetes') limit on keys plus
// values.
const maxAnnotationBytes = 256 * 1024

// annotationMapValidator checks annotation keys (qualified names, case
// ignored) and the total size, as the agent does.
func annotationMapValidator() validator.Map {
	return mapCheck{
		describedAs: "keys must be qualified names (`example.com/name`); keys and values together at most 256 KiB",
		check: func(p path.Path, elems map[string]attr.Value, diags *diag.Diagnostics) {
			total := 0
			for k, e := range elems {
				if msgs := content.IsLabelKey(strings.ToLower(k)); len(msgs) > 0 {
					addBadKey(diags, p, k, msgs)
				}
				total += len(k)
				if s, ok := e.(types.String); ok {
					total += len(s.ValueString())
				}
			}
			if total > maxAnnotationBytes {
				diags.AddAttributeError(p, "Annotations too large",
					fmt.Sprintf("%s hold %d bytes of keys and values; at most %d are allowed.", p, total, maxAnnotationBytes))
			}
		},
	}
}

// addBadKey reports map key k of attribute p as invalid for msgs.
func addBadKey(diags *diag.Diagnostics, p path.Path, k string, msgs []string) {
	diags.AddAttributeError(p.AtMapKey(k), "Invalid "+lastStep(p)+" key",
		fmt.Sprintf("%s key %s is not valid: %s.", p, strconv.Quote(k), strings.Join(msgs, "; ")))
}

// macValidator accepts unicast MAC addresses in colon notation.
func macValidator() validator.String {
	return stringCheck{
		describedAs: "must be a unicast MAC address such as 02:00:00:00:00:01",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
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
				diags.AddAttributeError(p, "Invalid mac_address", fmt.Sprintf("%s %s %s.", p, strconv.Quote(s), bad))
			}
		},
	}
}

// imagePathValidator applies the agent's image reference rules that do
// not depend on the node: no ".." and no NUL. Absolute paths are left to
// the agent, which accepts them inside its image directory only.
func imagePathValidator() validator.String {
	return stringCheck{
		describedAs: "must be a path relative to the node image directory (or an absolute path inside it), without `..`",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if filepath.IsAbs(s) {
				return // only the agent knows its image directory
			}
			addFieldErrors(diags, p, s, validation.ValidateImagePath(s, field.NewPath(p.String()), ""))
		},
	}
}
