package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr/xattr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestQuantitySemanticEquality(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"1Gi", "1024Mi", true},
		{"0.5Gi", "512Mi", true},
		{"1Gi", "1073741824", true},
		{"1G", "1Gi", false},
		{"1Gi", "2Gi", false},
		{"1GB", "1GB", false}, // invalid values are never equal
	} {
		got, _ := quantityOf(c.a).StringSemanticEquals(ctx, quantityOf(c.b))
		if got != c.want {
			t.Errorf("%s == %s: %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

func TestQuantityValidation(t *testing.T) {
	ctx := context.Background()
	syntax := func(s string) string {
		var resp xattr.ValidateAttributeResponse
		quantityOf(s).ValidateAttribute(ctx, xattr.ValidateAttributeRequest{Path: path.Root("memory")}, &resp)
		if !resp.Diagnostics.HasError() {
			return ""
		}
		return resp.Diagnostics.Errors()[0].Detail()
	}
	for in, want := range map[string]string{
		"512Mi":  "",
		"1G":     "",
		"1GB":    `memory "1GB" is not valid: it must be a Kubernetes quantity such as 512Mi or 1Gi: a number followed by a binary suffix (Ki, Mi, Gi, Ti: powers of 1024) or a decimal one (k, M, G, T: powers of 1000). Did you mean "1Gi"?`,
		"512mb":  `Did you mean "512Mi"?`,
		"2 GiB":  `Did you mean "2Gi"?`,
		"lots":   `memory "lots" is not valid`,
		"1.5TiB": `Did you mean "1.5Ti"?`,
	} {
		got := syntax(in)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%q: got %q, want %q", in, got, want)
		}
	}
	rng := func(v validator.String, s string) string {
		var resp validator.StringResponse
		v.ValidateString(ctx, validator.StringRequest{Path: path.Root("memory"), ConfigValue: types.StringValue(s)}, &resp)
		if !resp.Diagnostics.HasError() {
			return ""
		}
		return resp.Diagnostics.Errors()[0].Detail()
	}
	mem := quantityRange("16Mi", "1Ti")
	for in, want := range map[string]string{
		"16Mi": "", "1Ti": "", "8Mi": "must be at least 16Mi", "2Ti": "must be at most 1Ti",
		"1000.5": "must be at least 16Mi", "16777216.5": "must be a whole number of bytes",
	} {
		if got := rng(mem, in); (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("memory %q: got %q, want %q", in, got, want)
		}
	}
	if got := rng(quantityRange("", "1Ei"), "0"); !strings.Contains(got, "greater than zero") {
		t.Errorf("size 0: %q", got)
	}
}

func TestQuantityKeepState(t *testing.T) {
	ctx := context.Background()
	run := func(cfg, state string) string {
		req := planmodifier.StringRequest{ConfigValue: types.StringValue(cfg), StateValue: types.StringValue(state), PlanValue: types.StringValue(cfg)}
		resp := planmodifier.StringResponse{PlanValue: req.PlanValue}
		quantityKeepState().PlanModifyString(ctx, req, &resp)
		return resp.PlanValue.ValueString()
	}
	if got := run("1024Mi", "1Gi"); got != "1Gi" {
		t.Errorf("equal quantity planned %q, want the state's 1Gi", got)
	}
	if got := run("2Gi", "1Gi"); got != "2Gi" {
		t.Errorf("changed quantity planned %q", got)
	}
}
