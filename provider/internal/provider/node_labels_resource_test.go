package provider

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Keys an admin cannot set are refused at plan time on the key itself;
// syntax is labelMapValidator's to report, once.
func TestAdminLabelKeysValidator(t *testing.T) {
	elems := map[string]attr.Value{}
	for _, k := range []string{"tier", "example.com/rack", apiv1.LabelKVM, "node.virtplane.io/disk", apiv1.LabelNodeName, "bad key"} {
		elems[k] = types.StringValue("x")
	}
	var resp validator.MapResponse
	adminLabelKeysValidator().ValidateMap(context.Background(), validator.MapRequest{
		Path: path.Root("labels"), ConfigValue: types.MapValueMust(types.StringType, elems),
	}, &resp)
	var got []string
	for _, e := range resp.Diagnostics.Errors() {
		got = append(got, e.(diag.DiagnosticWithPath).Path().String())
		if !strings.Contains(e.Detail(), "cannot be set") {
			t.Errorf("%s: %s", e.Summary(), e.Detail())
		}
	}
	slices.Sort(got)
	want := []string{`labels["node.virtplane.io/disk"]`, `labels["node.virtplane.io/kvm"]`, `labels["virtplane.io/node-name"]`}
	if !slices.Equal(got, want) {
		t.Fatalf("errors on %v, want %v", got, want)
	}
}

// The agent's errors about a Label request land on node and labels.
func TestNodeLabelsErrorsLandOnAttributes(t *testing.T) {
	req := &apiv1.LabelNodeRequest{Name: "Bad_Name", Set: map[string]string{"tier": "a b"}, Remove: []string{apiv1.LabelKVM}}
	err := validation.ToStatusError("Node", "Bad_Name", validation.ValidateLabelNode(req))
	var diags diag.Diagnostics
	addObjectError(&diags, err, "unix:///x", "label node Bad_Name", nodeLabelsKind)
	var got []string
	for _, e := range diags.Errors() {
		if wp, ok := e.(diag.DiagnosticWithPath); ok {
			got = append(got, wp.Path().String())
		}
	}
	slices.Sort(got)
	if want := []string{"labels", `labels["tier"]`, "node"}; !slices.Equal(got, want) {
		t.Fatalf("errors on %v, want %v (%v)", got, want, diags)
	}
	if p, ok := nodeLabelsAttributePath("metadata.labels"); !ok || !p.Equal(path.Root("labels")) {
		t.Fatalf("metadata.labels maps to %v, %v", p, ok)
	}
}
