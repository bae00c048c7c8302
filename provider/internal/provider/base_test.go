package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Read keeps an object in the state only while the agent has the very
// object the state records; it drops one that is gone or was replaced, and
// an agent that cannot answer is an error, never a deletion.
func TestStillManaged(t *testing.T) {
	ctx := context.Background()
	r := &configuredResource{kind: imageKind, data: &providerData{endpoint: "unix:///x"}}
	for _, c := range []struct {
		name             string
		stateUID, gotUID string
		err              error
		keep, dropped    bool
		errorSays        string
		warningSays      string
	}{
		{name: "same object", stateUID: "u1", gotUID: "u1", keep: true},
		{name: "imported, uid not yet read", stateUID: "", gotUID: "u1", keep: true},
		{name: "deleted", stateUID: "u1", err: status.Error(codes.NotFound, "no image debian"), dropped: true},
		{name: "replaced", stateUID: "u1", gotUID: "u2", dropped: true,
			warningSays: "The image Terraform created (uid u1) is gone and another image of the same name (uid u2) exists."},
		{name: "unreachable", stateUID: "u1", err: status.Error(codes.Unavailable, "connection refused"),
			errorSays: "Cannot read image debian: the virtplane agent is unreachable at unix:///x"},
		{name: "not a status", stateUID: "u1", err: errors.New("boom"), errorSays: "Cannot read image debian"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := &resource.ReadResponse{State: nonNullState(t)}
			got := r.stillManaged(ctx, resp, "debian", c.stateUID, c.gotUID, c.err)
			if got != c.keep {
				t.Errorf("stillManaged = %v, want %v", got, c.keep)
			}
			if dropped := resp.State.Raw.IsNull(); dropped != c.dropped {
				t.Errorf("state removed = %v, want %v", dropped, c.dropped)
			}
			errs, warns := resp.Diagnostics.Errors(), resp.Diagnostics.Warnings()
			if (c.errorSays != "") != (len(errs) == 1) || (len(errs) == 1 && !strings.Contains(errs[0].Detail(), c.errorSays)) {
				t.Errorf("errors %v, want one saying %q", errs, c.errorSays)
			}
			if (c.warningSays != "") != (len(warns) == 1) || (len(warns) == 1 && !strings.Contains(warns[0].Detail(), c.warningSays)) {
				t.Errorf("warnings %v, want one saying %q", warns, c.warningSays)
			}
		})
	}
}

// A read during plan with an unknown provider configuration explains
// itself, or defers when Terraform allows it; it never dials.
func TestReadWithUnknownProviderConfig(t *testing.T) {
	ctx := context.Background()
	ds := &nodesDataSource{configuredDataSource{data: &providerData{unknown: []string{"endpoint"}}}}
	var sresp datasource.SchemaResponse
	ds.Schema(ctx, datasource.SchemaRequest{}, &sresp)
	typ := sresp.Schema.Type().TerraformType(ctx)
	cfg := tftypes.NewValue(typ, map[string]tftypes.Value{
		"id":             tftypes.NewValue(tftypes.String, nil),
		"label_selector": tftypes.NewValue(tftypes.String, nil),
		"nodes":          tftypes.NewValue(typ.(tftypes.Object).AttributeTypes["nodes"], nil),
	})
	read := func(deferralAllowed bool) *datasource.ReadResponse {
		req := datasource.ReadRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: cfg}}
		req.ClientCapabilities.DeferralAllowed = deferralAllowed
		resp := &datasource.ReadResponse{State: tfsdk.State{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, nil)}}
		ds.Read(ctx, req, resp)
		return resp
	}

	resp := read(false)
	if errs := resp.Diagnostics.Errors(); len(errs) != 1 ||
		!strings.Contains(errs[0].Summary(), "not known yet") ||
		!strings.Contains(errs[0].Detail(), "endpoint") || !strings.Contains(errs[0].Detail(), "depends_on") {
		t.Errorf("want one error naming endpoint and depends_on, got %v", resp.Diagnostics)
	}
	resp = read(true)
	if resp.Diagnostics.HasError() || resp.Deferred == nil ||
		resp.Deferred.Reason != datasource.DeferredReasonProviderConfigUnknown {
		t.Errorf("with deferral allowed: deferred %v, diags %v", resp.Deferred, resp.Diagnostics)
	}
}
