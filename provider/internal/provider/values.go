package provider

import (
	"context"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Conversions between API values and Terraform values that every kind
// uses: where "" or an empty map is null and where it is not.

// readString maps "" to null, unless the prior value was a known "" (a
// configuration that says `x = ""` must read back as "", not null).
func readString(s string, prior types.String) types.String {
	if s != "" {
		return types.StringValue(s)
	}
	if !prior.IsNull() && !prior.IsUnknown() && prior.ValueString() == "" {
		return types.StringValue("")
	}
	return types.StringNull()
}

// readBool maps false to null, unless the prior value was a known false
// (a configuration that says `x = false` must read back as false).
func readBool(b bool, prior types.Bool) types.Bool {
	if b || (!prior.IsNull() && !prior.IsUnknown()) {
		return types.BoolValue(b)
	}
	return types.BoolNull()
}

// mapFromAPI maps an empty map to null, unless the prior value was a known
// empty map or full is set (data sources return empty maps, so lookup()
// works on them).
func mapFromAPI(m map[string]string, prior types.Map, full bool, diags *diag.Diagnostics) types.Map {
	if len(m) == 0 && !full && (prior.IsNull() || prior.IsUnknown()) {
		return types.MapNull(types.StringType)
	}
	if m == nil {
		m = map[string]string{}
	}
	v, d := types.MapValueFrom(context.Background(), types.StringType, m)
	diags.Append(d...)
	return v
}

// stringMap converts a known map attribute; null gives nil.
func stringMap(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	if len(out) == 0 {
		return nil
	}
	return out
}

// optString maps "not reported" to null rather than "", so that
// coalesce() and null checks work in configurations.
func optString(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// optTime is t as RFC 3339 in UTC, null when unset.
func optTime(t *timestamppb.Timestamp) types.String {
	if t == nil {
		return types.StringNull()
	}
	return types.StringValue(t.AsTime().UTC().Format(time.RFC3339))
}

// stringList is a list attribute of strings.
func stringList(ss []string, diags *diag.Diagnostics) types.List {
	elems := make([]attr.Value, len(ss))
	for i, s := range ss {
		elems[i] = types.StringValue(s)
	}
	l, d := types.ListValue(types.StringType, elems)
	diags.Append(d...)
	return l
}

// shortDuration renders d as a configuration would write it: 5m, not
// 5m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
