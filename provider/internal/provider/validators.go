package provider

import (
	"context"
	"fmt"
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
)

// Validators more than one kind's attributes use, and what the provider's
// own validators are made of.

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

// addBadKey reports map key k of attribute p as invalid for msgs.
func addBadKey(diags *diag.Diagnostics, p path.Path, k string, msgs []string) {
	diags.AddAttributeError(p.AtMapKey(k), "Invalid "+lastStep(p)+" key",
		fmt.Sprintf("%s key %s is not valid: %s.", p, strconv.Quote(k), strings.Join(msgs, "; ")))
}

// addFieldErrors reports the agent's validation errors on attribute p.
func addFieldErrors(diags *diag.Diagnostics, p path.Path, shown string, errs field.ErrorList) {
	for _, e := range errs {
		detail := e.Detail
		if detail == "" {
			detail = e.ErrorBody()
		}
		diags.AddAttributeError(p, "Invalid "+lastStep(p),
			fmt.Sprintf("%s %s: %s.", p, strconv.Quote(shown), strings.TrimSuffix(detail, ".")))
	}
}
