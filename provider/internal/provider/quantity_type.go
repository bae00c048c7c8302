package provider

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/attr/xattr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
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

// quantityRange checks a valid quantity against bounds: lo == "" means
// greater than zero. Whole bytes are required, as the agent requires.
func quantityRange(lo, hi string) validator.String {
	description := "must be a quantity from " + lo + " to " + hi
	if lo == "" {
		description = "must be a quantity greater than zero and at most " + hi
	}
	return stringCheck{describedAs: describedAs(description), check: func(p path.Path, s string, diags *diag.Diagnostics) {
		c, err := validation.CanonicalQuantity(s)
		if err != nil {
			return // the type reports the syntax error
		}
		v := resource.MustParse(c)
		bad := ""
		switch {
		case lo == "" && v.Sign() <= 0:
			bad = "must be greater than zero"
		case lo != "" && v.Cmp(resource.MustParse(lo)) < 0:
			bad = "must be at least " + lo
		case v.Cmp(resource.MustParse(hi)) > 0:
			bad = "must be at most " + hi
		case v.Cmp(*resource.NewQuantity(v.Value(), resource.BinarySI)) != 0:
			bad = "must be a whole number of bytes"
		}
		if bad != "" {
			diags.AddAttributeError(p, "Invalid quantity", fmt.Sprintf("%s %s %s.", p, strconv.Quote(s), bad))
		}
	}}
}

// quantityKeepState plans the prior value when the configuration spells the
// same quantity differently, so that "1Gi" after "1024Mi" (or after an
// import, which reads the canonical form) is not a change.
func quantityKeepState() planmodifier.String {
	return keepEquivalentState{
		describedAs: "equal quantities in another spelling are not a change",
		equivalent: func(config, state string) bool {
			return config != state && validation.EqualQuantities(config, state)
		},
	}
}
