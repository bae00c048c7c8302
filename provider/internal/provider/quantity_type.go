package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/attr/xattr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Quantities (memory, disk sizes) are strings whose spelling the agent
// canonicalises ("1024Mi" is stored as "1Gi"). A plain string attribute
// would then show a diff on every plan and fail applies with "inconsistent
// result"; quantityType compares values instead of spellings.

var (
	_ basetypes.StringTypable                    = quantityType{}
	_ basetypes.StringValuableWithSemanticEquals = quantityValue{}
	_ xattr.ValidateableAttribute                = quantityValue{}
)

// quantityType is the attribute type of quantity strings.
type quantityType struct {
	basetypes.StringType
}

func (t quantityType) String() string { return "provider.quantityType" }

func (t quantityType) Equal(o attr.Type) bool {
	_, ok := o.(quantityType)
	return ok
}

func (t quantityType) ValueType(context.Context) attr.Value { return quantityValue{} }

func (t quantityType) ValueFromString(_ context.Context, in basetypes.StringValue) (basetypes.StringValuable, diag.Diagnostics) {
	return quantityValue{StringValue: in}, nil
}

func (t quantityType) ValueFromTerraform(ctx context.Context, in tftypes.Value) (attr.Value, error) {
	v, err := t.StringType.ValueFromTerraform(ctx, in)
	if err != nil {
		return nil, err
	}
	s, ok := v.(basetypes.StringValue)
	if !ok {
		return nil, fmt.Errorf("unexpected value type %T", v)
	}
	return quantityValue{StringValue: s}, nil
}

// quantityValue is a quantity string such as "512Mi".
type quantityValue struct {
	basetypes.StringValue
}

func quantityOf(s string) quantityValue {
	return quantityValue{StringValue: basetypes.NewStringValue(s)}
}

func (v quantityValue) Type(context.Context) attr.Type { return quantityType{} }

func (v quantityValue) Equal(o attr.Value) bool {
	other, ok := o.(quantityValue)
	return ok && v.StringValue.Equal(other.StringValue)
}

// StringSemanticEquals lets the framework keep the user's spelling when the
// agent answers with the canonical one (after create, update and read).
func (v quantityValue) StringSemanticEquals(_ context.Context, nv basetypes.StringValuable) (bool, diag.Diagnostics) {
	other, ok := nv.(quantityValue)
	if !ok {
		return false, nil
	}
	return validation.EqualQuantities(v.ValueString(), other.ValueString()), nil
}

// ValidateAttribute checks the syntax wherever the type is used; ranges
// depend on the attribute and are left to quantityRange.
func (v quantityValue) ValidateAttribute(_ context.Context, req xattr.ValidateAttributeRequest, resp *xattr.ValidateAttributeResponse) {
	if v.IsNull() || v.IsUnknown() {
		return
	}
	if _, err := validation.CanonicalQuantity(v.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid quantity", quantityHelp(req.Path.String(), v.ValueString()))
	}
}

// quantityHelp explains a malformed quantity, with a suggestion for the
// usual mistakes (GB, MiB, lower-case suffixes).
func quantityHelp(attrName, s string) string {
	msg := fmt.Sprintf("%s %s is not valid: it must be a Kubernetes quantity such as 512Mi or 1Gi: a number "+
		"followed by a binary suffix (Ki, Mi, Gi, Ti: powers of 1024) or a decimal one (k, M, G, T: powers of 1000).",
		attrName, strconv.Quote(s))
	if fix := suggestQuantity(s); fix != "" {
		msg += fmt.Sprintf(" Did you mean %q?", fix)
	}
	return msg
}

// suggestQuantity maps common non-Kubernetes spellings to the quantity the
// user most likely meant; "" when there is no obvious fix.
func suggestQuantity(s string) string {
	s = strings.TrimSpace(s)
	num := strings.TrimRight(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ ")
	unit := strings.ToUpper(strings.TrimSpace(s[len(num):]))
	if num == "" {
		return ""
	}
	fixes := map[string]string{
		"KB": "Ki", "KIB": "Ki", "K": "Ki",
		"MB": "Mi", "MIB": "Mi", "M": "Mi",
		"GB": "Gi", "GIB": "Gi", "G": "Gi",
		"TB": "Ti", "TIB": "Ti", "T": "Ti",
	}
	suffix, ok := fixes[unit]
	if !ok {
		return ""
	}
	fix := num + suffix
	if _, err := validation.CanonicalQuantity(fix); err != nil || fix == s {
		return ""
	}
	return fix
}

// quantityRange checks a valid quantity against bounds: min == "" means
// greater than zero. Whole bytes are required, as the agent requires.
type quantityRange struct {
	min, max string
}

var _ validator.String = quantityRange{}

func (q quantityRange) Description(context.Context) string {
	if q.min == "" {
		return "must be a quantity greater than zero and at most " + q.max
	}
	return "must be a quantity from " + q.min + " to " + q.max
}

func (q quantityRange) MarkdownDescription(ctx context.Context) string { return q.Description(ctx) }

func (q quantityRange) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	s := req.ConfigValue.ValueString()
	c, err := validation.CanonicalQuantity(s)
	if err != nil {
		return // the type reports the syntax error
	}
	v := resource.MustParse(c)
	bad := ""
	switch {
	case q.min == "" && v.Sign() <= 0:
		bad = "must be greater than zero"
	case q.min != "" && v.Cmp(resource.MustParse(q.min)) < 0:
		bad = "must be at least " + q.min
	case v.Cmp(resource.MustParse(q.max)) > 0:
		bad = "must be at most " + q.max
	case v.Cmp(*resource.NewQuantity(v.Value(), resource.BinarySI)) != 0:
		bad = "must be a whole number of bytes"
	}
	if bad != "" {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid quantity",
			fmt.Sprintf("%s %s %s.", req.Path, strconv.Quote(s), bad))
	}
}

// quantityKeepState plans the prior value when the configuration spells the
// same quantity differently, so that "1Gi" after "1024Mi" (or after an
// import, which reads the canonical form) is not a change. Terraform accepts
// a planned value equal to the prior state in place of an equivalent
// configuration value.
type quantityKeepState struct{}

var _ planmodifier.String = quantityKeepState{}

func (quantityKeepState) Description(context.Context) string {
	return "equal quantities in another spelling are not a change"
}

func (m quantityKeepState) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (quantityKeepState) PlanModifyString(_ context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() || req.StateValue.IsNull() || req.StateValue.IsUnknown() {
		return
	}
	if req.ConfigValue.ValueString() != req.StateValue.ValueString() &&
		validation.EqualQuantities(req.ConfigValue.ValueString(), req.StateValue.ValueString()) {
		resp.PlanValue = req.StateValue
	}
}
