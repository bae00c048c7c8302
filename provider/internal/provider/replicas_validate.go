package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Configuration checks the pool and the replica set share.

// validateSelector checks at plan time what the API refuses: a selector
// that does not match the template's labels, or none at all (no selector
// and no labels to default it to).
func validateSelector(ctx context.Context, cfg tfsdk.Config, labelsPath path.Path, diags *diag.Diagnostics) {
	var sel, labels types.Map
	if d := cfg.GetAttribute(ctx, path.Root("selector"), &sel); d.HasError() || sel.IsUnknown() {
		return
	}
	if d := cfg.GetAttribute(ctx, labelsPath, &labels); d.HasError() || labels.IsUnknown() {
		return
	}
	for _, v := range []types.Map{sel, labels} {
		for _, e := range v.Elements() {
			if e.IsUnknown() {
				return
			}
		}
	}
	switch {
	case !sel.IsNull() && len(sel.Elements()) == 0:
		diags.AddAttributeError(path.Root("selector"), "Empty selector",
			"selector needs at least one label: an empty selector would select everything in the namespace. "+
				"Leave it out to select by "+labelsPath.String()+".")
	case sel.IsNull() && len(labels.Elements()) == 0:
		diags.AddAttributeError(labelsPath, "Missing labels",
			labelsPath.String()+" needs at least one label: the replicas are told apart from other objects by them "+
				"(selector defaults to them).")
	case !sel.IsNull() && !selects(sel, labels):
		diags.AddAttributeError(path.Root("selector"), "Selector does not match the template",
			fmt.Sprintf("selector %s is not among %s %s: what the controller makes would never count as its own.",
				selectorText(sel), labelsPath, selectorText(labels)))
	}
}

// selectorText renders a map of labels as a selector ("app=web,tier=db").
func selectorText(m types.Map) string {
	s := map[string]string{}
	for k, v := range m.Elements() {
		if sv, ok := v.(types.String); ok {
			s[k] = sv.ValueString()
		}
	}
	return apiv1.SelectorString(&apiv1.LabelSelector{MatchLabels: s})
}

// validateTemplate checks, when the configuration has the template block
// at base, the template as the VM resource checks its settings and the
// selector against the template's labels (base's labels), and reports
// whether it had the block. A missing one is IsRequired's to report.
func validateTemplate(ctx context.Context, cfg tfsdk.Config, base path.Path, diags *diag.Diagnostics) bool {
	var present types.Object
	if d := cfg.GetAttribute(ctx, base, &present); d.HasError() || present.IsNull() || present.IsUnknown() {
		return false
	}
	validateInstanceSpec(ctx, cfg, base, diags)
	validateSelector(ctx, cfg, base.AtName("labels"), diags)
	return true
}
