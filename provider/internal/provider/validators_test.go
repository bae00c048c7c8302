package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestLabelSelectorValidator(t *testing.T) {
	for sel, ok := range map[string]bool{
		"":                  true,
		"zone=a,gpu!=true":  true,
		"tier in (db,web)":  true,
		"!maintenance":      true,
		"zone in ((a)":      false,
		"==":                false,
		"zone=a b":          false,
		"bad key!/x=1":      false,
		"zone notin (a,b),": false,
	} {
		req := validator.StringRequest{Path: path.Root("label_selector"), ConfigValue: types.StringValue(sel)}
		var resp validator.StringResponse
		labelSelectorValidator().ValidateString(context.Background(), req, &resp)
		if got := !resp.Diagnostics.HasError(); got != ok {
			t.Errorf("selector %q: valid = %v, want %v (%v)", sel, got, ok, resp.Diagnostics)
		}
		if !ok && !strings.Contains(resp.Diagnostics.Errors()[0].Detail(), "label_selector") {
			t.Errorf("selector %q: error does not name label_selector", sel)
		}
	}
	// Unknown values are checked once they are known.
	var resp validator.StringResponse
	labelSelectorValidator().ValidateString(context.Background(),
		validator.StringRequest{Path: path.Root("label_selector"), ConfigValue: types.StringUnknown()}, &resp)
	if resp.Diagnostics.HasError() {
		t.Error("unknown selector rejected")
	}
}

func TestEnumValidator(t *testing.T) {
	ctx := context.Background()
	check := func(v string) string {
		var resp validator.StringResponse
		oneOf(apiv1.RunStrategies()...).ValidateString(ctx, validator.StringRequest{Path: path.Root("run_strategy"), ConfigValue: types.StringValue(v)}, &resp)
		if !resp.Diagnostics.HasError() {
			return ""
		}
		e := resp.Diagnostics.Errors()[0]
		return e.Summary() + ": " + e.Detail()
	}
	if got := check("Always"); got != "" {
		t.Errorf("Always refused: %s", got)
	}
	want := `Invalid run_strategy: run_strategy must be one of "Always", "RerunOnFailure", "Manual", "Halted", "Once" (case-sensitive), got "always". Did you mean "Always"?`
	if got := check("always"); got != want {
		t.Errorf("always:\n got %s\nwant %s", got, want)
	}
	if got := check("Sometimes"); strings.Contains(got, "Did you mean") || !strings.Contains(got, `got "Sometimes"`) {
		t.Errorf("Sometimes: %s", got)
	}
}

func TestOtherValidators(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		v    validator.String
		in   string
		want bool
	}{
		{dnsLabelValidator(), "web-1", true},
		{dnsLabelValidator(), "Web", false},
		{dnsLabelValidator(), "a_b", false},
		{macValidator(), "02:00:00:00:00:01", true},
		{macValidator(), "01:00:00:00:00:01", false},
		{macValidator(), "00:00:00:00:00:00", false},
		{macValidator(), "nope", false},
		{imagePathValidator(), "debian/12.qcow2", true},
		{imagePathValidator(), "../etc/passwd", false},
		{imagePathValidator(), "/images/abs.qcow2", true}, // the agent decides
		{imagePathValidator(), "", false},
	} {
		if got, _ := validString(c.v, c.in); got != c.want {
			t.Errorf("%q (%s) = %v, want %v", c.in, c.v.Description(ctx), got, c.want)
		}
	}
	labels := func(m map[string]string) bool {
		var resp validator.MapResponse
		labelMapValidator().ValidateMap(ctx, validator.MapRequest{Path: path.Root("labels"), ConfigValue: mustMap(t, m)}, &resp)
		return !resp.Diagnostics.HasError()
	}
	if !labels(map[string]string{"app": "web", "example.com/tier": "db"}) {
		t.Error("valid labels refused")
	}
	if labels(map[string]string{"bad key": "x"}) || labels(map[string]string{"k": "bad value!"}) {
		t.Error("invalid labels accepted")
	}
}
