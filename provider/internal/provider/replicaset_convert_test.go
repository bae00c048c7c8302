package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// A replica set's template round-trips as the VM resource's instance
// settings do.
func TestReplicaSetModelRoundTrip(t *testing.T) {
	ctx := context.Background()
	in := replicaSetModel{
		Name: types.StringValue("web"), Namespace: types.StringValue("prod"),
		Replicas: types.Int64Value(0), Selector: mustMap(t, map[string]string{"app": "web"}), Paused: types.BoolValue(false),
		Template: &instanceTemplateModel{
			Labels:            mustMap(t, map[string]string{"app": "web", "tier": "front"}),
			Annotations:       mustMap(t, map[string]string{"example.com/a": "b"}),
			instanceSpecModel: templateSpec(t, false),
		},
	}
	rs, d := replicaSetFromModel(ctx, &in)
	if d.HasError() {
		t.Fatal(d)
	}
	validation.DefaultReplicaSet(rs)
	if errs := validation.ValidateReplicaSet(rs, validation.Options{}); len(errs) > 0 {
		t.Fatalf("the API would reject the replica set: %v", errs.ToAggregate())
	}
	out, d := replicaSetToModel(rs, []string{"web-abcde"}, &in, false)
	if d.HasError() {
		t.Fatal(d)
	}
	if out.Replicas.ValueInt64() != 0 || !out.Selector.Equal(in.Selector) || !out.Template.Labels.Equal(in.Template.Labels) ||
		!out.Template.Annotations.Equal(in.Template.Annotations) {
		t.Errorf("read back replicas %s, selector %s, labels %s, annotations %s", out.Replicas, out.Selector, out.Template.Labels, out.Template.Annotations)
	}
	out.Template.Memory = in.Template.Memory
	a, b := vmModel{}, vmModel{}
	a.instanceSpecModel, b.instanceSpecModel = in.Template.instanceSpecModel, out.Template.instanceSpecModel
	if diff := compareModels(a, b); diff != "" {
		t.Errorf("round trip changed the template:\n%s", diff)
	}
}
