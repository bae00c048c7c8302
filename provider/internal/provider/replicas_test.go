package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	rschema "github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

func TestReplicaSchemasDocumentEveryAttribute(t *testing.T) {
	pool := documentedResource(t, NewPoolResource())
	mirrorsResource(t, pool, documentedDataSource(t, NewPoolDataSource()), "wait_for_ready")
	rs := documentedResource(t, NewReplicaSetResource())
	mirrorsResource(t, rs, documentedDataSource(t, NewReplicaSetDataSource()), "wait_for_ready")
}

// templateSpec is fullInstanceSpec as a template may have it: no MAC
// addresses (each replica gets its own).
func templateSpec(t *testing.T, persistent bool) instanceSpecModel {
	s := fullInstanceSpec(t)
	s.Interfaces = append([]interfaceModel(nil), s.Interfaces...)
	for i := range s.Interfaces {
		s.Interfaces[i].MACAddress = types.StringNull()
	}
	if !persistent {
		s.Disks = s.Disks[1:]
	}
	return s
}

// fullPoolModel sets every attribute of a pool a configuration can set.
func fullPoolModel(t *testing.T) poolModel {
	vm := fullModel(t)
	vm.instanceSpecModel = templateSpec(t, true)
	return poolModel{
		Name: types.StringValue("db"), Namespace: types.StringValue("prod"),
		Replicas:       types.Int64Value(3),
		Selector:       mustMap(t, map[string]string{"app": "web"}),
		Paused:         types.BoolValue(true),
		MaxUnavailable: types.StringValue("25%"),
		ScaleInOrder:   types.StringValue(apiv1.ScaleInOldest),
		Template:       &vm.vmSpecModel,
	}
}

// storedPool runs what the API does on create: defaulting, then
// validation.
func storedPool(t *testing.T, p *apiv1.VirtualMachinePool) *apiv1.VirtualMachinePool {
	t.Helper()
	p = proto.Clone(p).(*apiv1.VirtualMachinePool)
	validation.DefaultPool(p)
	if errs := validation.ValidatePool(p, validation.Options{}); len(errs) > 0 {
		t.Fatalf("the API would reject the pool: %v", errs.ToAggregate())
	}
	p.Metadata.Uid = "uid-p"
	return p
}

// Whatever a configuration sets comes back unchanged after the API's
// defaulting, the template as the VM resource's settings do.
func TestPoolModelRoundTrip(t *testing.T) {
	ctx := context.Background()
	in := fullPoolModel(t)
	p, d := poolFromModel(ctx, &in)
	if d.HasError() {
		t.Fatal(d)
	}
	out, d := poolToModel(storedPool(t, p), []string{"db-0"}, &in, false)
	if d.HasError() {
		t.Fatal(d)
	}
	for name, c := range map[string][2]string{
		"id":              {out.ID.ValueString(), "prod/db"},
		"replicas":        {out.Replicas.String(), "3"},
		"selector":        {out.Selector.String(), in.Selector.String()},
		"paused":          {out.Paused.String(), "true"},
		"max_unavailable": {out.MaxUnavailable.ValueString(), "25%"},
		"scale_in_order":  {out.ScaleInOrder.ValueString(), "Oldest"},
		"vm_names":        {out.Status.Attributes()["vm_names"].String(), `["db-0"]`},
	} {
		if c[0] != c[1] {
			t.Errorf("%s read back as %s, want %s", name, c[0], c[1])
		}
	}
	out.Template.Memory = in.Template.Memory // 1024Mi came back as 1Gi
	if diff := compareModels(vmModel{vmSpecModel: *in.Template}, vmModel{vmSpecModel: *out.Template}); diff != "" {
		t.Errorf("round trip changed the template:\n%s", diff)
	}

	// Left out, the API's defaults read back as the schema's.
	in = poolModel{Name: types.StringValue("db"), Namespace: types.StringValue("default"),
		Replicas: types.Int64Value(1), Selector: mustMap(t, map[string]string{"app": "db"}),
		Template: &vmSpecModel{Labels: mustMap(t, map[string]string{"app": "db"}), Annotations: types.MapNull(types.StringType),
			RunStrategy: types.StringValue("Always"), instanceSpecModel: minimalInstanceSpec()}}
	p, _ = poolFromModel(ctx, &in)
	out, _ = poolToModel(storedPool(t, p), nil, &in, false)
	if out.MaxUnavailable.ValueString() != "100%" || out.ScaleInOrder.ValueString() != "DescendingOrder" || out.Paused.ValueBool() {
		t.Errorf("defaults read back as max_unavailable %s, scale_in_order %s, paused %s", out.MaxUnavailable, out.ScaleInOrder, out.Paused)
	}
	if out.Template.CPU != nil || !out.Template.NodeSelector.IsNull() || out.Template.NodeFailurePolicy.ValueString() != "Wait" {
		t.Errorf("template defaults read back as cpu %v, node_selector %s, node_failure_policy %s",
			out.Template.CPU, out.Template.NodeSelector, out.Template.NodeFailurePolicy)
	}
	if got := out.Status.Attributes()["vm_names"].String(); got != "[]" {
		t.Errorf("vm_names of a pool without VMs = %s, want []", got)
	}
}

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

// An update keeps what the schema does not model: the pool's own
// metadata, its VM template's annotations (each VM's), the instance
// template's labels and disk serials.
func TestMergePoolKeepsUnmanagedFields(t *testing.T) {
	ctx := context.Background()
	m := fullPoolModel(t)
	want, _ := poolFromModel(ctx, &m)
	cur := storedPool(t, want)
	cur.Metadata.Annotations = map[string]string{"tool": "x"}
	cur.Spec.VirtualMachineTemplate.Metadata.Annotations = map[string]string{"vm": "y"}
	cur.Spec.VirtualMachineTemplate.Spec.Template.Metadata.Labels = map[string]string{"tmpl": "z"}
	cur.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Devices.Disks[0].Serial = "SER1"
	cur.Status = &apiv1.VirtualMachinePoolStatus{Replicas: 3}

	m.Replicas = types.Int64Value(5)
	m.Template.Memory = quantityOf("2Gi")
	want, _ = poolFromModel(ctx, &m)
	next := mergePool(cur, want)
	tmpl := next.Spec.VirtualMachineTemplate
	switch {
	case next.Metadata.Annotations["tool"] != "x":
		t.Error("pool annotations lost")
	case tmpl.Metadata.Annotations["vm"] != "y":
		t.Error("VM template annotations lost")
	case tmpl.Spec.Template.Metadata.Labels["tmpl"] != "z":
		t.Error("instance template labels lost")
	case tmpl.Spec.Template.Spec.Domain.Devices.Disks[0].Serial != "SER1":
		t.Error("disk serial lost")
	case next.Spec.DesiredReplicas() != 5 || tmpl.Spec.Template.Spec.Domain.Memory.Guest != "2Gi":
		t.Errorf("the plan was not applied: replicas %d, memory %s", next.Spec.DesiredReplicas(), tmpl.Spec.Template.Spec.Domain.Memory.Guest)
	case cur.Spec.DesiredReplicas() != 3:
		t.Error("mergePool modified its input")
	}
}

// The API's validation errors land on the attributes that caused them,
// inside the template blocks.
func TestReplicaErrorsLandOnAttributes(t *testing.T) {
	ctx := context.Background()
	m := fullPoolModel(t)
	m.Template.Disks[1].Image = types.StringValue("../escape.qcow2")
	m.Template.Interfaces[0].MACAddress = types.StringValue("02:00:00:00:00:01")
	m.MaxUnavailable = types.StringValue("0")
	m.Selector = mustMap(t, map[string]string{"app": "other"})
	p, _ := poolFromModel(ctx, &m)
	validation.DefaultPool(p)
	err := validation.ToStatusError("VirtualMachinePool", "db", validation.ValidatePool(p, validation.Options{}))
	wantErrorsOn(t, err, poolKind, "virtual_machine_template.disk[1].image",
		"virtual_machine_template.interface[0].mac_address", "max_unavailable", "selector")

	rm := replicaSetModel{Name: types.StringValue("web"), Namespace: types.StringValue("default"), Replicas: types.Int64Value(1),
		Selector: mustMap(t, map[string]string{"app": "web"}),
		Template: &instanceTemplateModel{Labels: mustMap(t, map[string]string{"app": "web"}), Annotations: types.MapNull(types.StringType),
			instanceSpecModel: fullInstanceSpec(t)}}
	rs, _ := replicaSetFromModel(ctx, &rm)
	validation.DefaultReplicaSet(rs)
	err = validation.ToStatusError("VirtualMachineInstanceReplicaSet", "web", validation.ValidateReplicaSet(rs, validation.Options{}))
	wantErrorsOn(t, err, replicaSetKind, "template.disk[0].persistent", "template.interface[0].mac_address")
}

func wantErrorsOn(t *testing.T, err error, k objectKind, paths ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("the API accepted an invalid object")
	}
	var diags diagsT
	addObjectError(&diags.d, err, "unix:///x", "create it", k)
	got := map[string]bool{}
	for _, e := range diags.d.Errors() {
		if wp, ok := e.(interface{ Path() path.Path }); ok {
			got[wp.Path().String()] = true
		}
	}
	for _, want := range paths {
		if !got[want] {
			t.Errorf("no error on %s; got errors on %v (%v)", want, got, diags.d)
		}
	}
}

func TestReplicaAttributePaths(t *testing.T) {
	for field, want := range map[string]string{
		"metadata.name":                   "name",
		"spec.replicas":                   "replicas",
		"spec.selector":                   "selector",
		"spec.selector.match_labels[app]": `selector["app"]`,
		"spec.max_unavailable":            "max_unavailable",
		"spec.virtual_machine_template.metadata.labels[app]":                `virtual_machine_template.labels["app"]`,
		"spec.virtual_machine_template.metadata.annotations":                "virtual_machine_template",
		"spec.virtual_machine_template.spec.run_strategy":                   "virtual_machine_template.run_strategy",
		"spec.virtual_machine_template.spec.template.metadata.annotations":  "virtual_machine_template.annotations",
		"spec.virtual_machine_template.spec.template.spec.domain.memory":    "virtual_machine_template.memory",
		"spec.virtual_machine_template.spec.template.spec.volumes[2].image": "virtual_machine_template.disk[2].image",
		"spec.virtual_machine_template.spec.template.spec.networks[1].name": "virtual_machine_template.interface[1].name",
		"spec.virtual_machine_template.spec.template.spec.domain.cpu.cores": "virtual_machine_template.cpu.cores",
		"spec.virtual_machine_template.spec.template.spec.node_selector[z]": `virtual_machine_template.node_selector["z"]`,
		"spec.virtual_machine_template.spec.template.spec.nonsense":         "virtual_machine_template",
		"spec.virtual_machine_template":                                     "virtual_machine_template",
	} {
		if p, ok := poolAttributePath(field); !ok || p.String() != want {
			t.Errorf("poolAttributePath(%q) = %s, %v; want %s", field, p, ok, want)
		}
	}
	for field, want := range map[string]string{
		"metadata.namespace":                                  "namespace",
		"spec.paused":                                         "paused",
		"spec.template":                                       "template",
		"spec.template.metadata.labels[app]":                  `template.labels["app"]`,
		"spec.template.metadata.labels":                       "template.labels",
		"spec.template.metadata.annotations[a]":               `template.annotations["a"]`,
		"spec.template.spec.domain.devices.disks[0]":          "template.disk[0]",
		"spec.template.spec.volumes[0].persistent":            "template.disk[0].persistent",
		"spec.template.spec.termination_grace_period_seconds": "template.termination_grace_period",
	} {
		if p, ok := replicaSetAttributePath(field); !ok || p.String() != want {
			t.Errorf("replicaSetAttributePath(%q) = %s, %v; want %s", field, p, ok, want)
		}
	}
	for _, field := range []string{"status.replicas", "spec", ""} {
		if p, ok := poolAttributePath(field); ok {
			t.Errorf("poolAttributePath(%q) = %s; want no attribute", field, p)
		}
	}
}

func TestMaxUnavailableValidator(t *testing.T) {
	for _, ok := range []string{"1", "3", "1%", "25%", "100%"} {
		if good, msg := validString(maxUnavailableValidator(), ok); !good {
			t.Errorf("%q refused: %s", ok, msg)
		}
	}
	for _, bad := range []string{"0", "0%", "101%", "-1", "01", "1.5", "", "%", "a"} {
		if good, _ := validString(maxUnavailableValidator(), bad); good {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The selector defaults to the template's labels when the object is made,
// and is kept while the labels include it (adding a label replaces
// nothing); once they do not, the labels are planned (and the object
// replaced).
func TestSelectorDefault(t *testing.T) {
	ctx := context.Background()
	sch := documentedResource(t, NewPoolResource())
	labelsPath := poolKindSchema.labels
	plan := func(labels map[string]string) tfsdk.Plan {
		p := tfsdk.Plan{Schema: sch, Raw: emptyValue(t, sch)}
		v := types.MapNull(types.StringType)
		if labels != nil {
			v = mustMap(t, labels)
		}
		if d := p.SetAttribute(ctx, labelsPath, v); d.HasError() {
			t.Fatal(d)
		}
		return p
	}
	null := types.MapNull(types.StringType)
	for _, c := range []struct {
		name          string
		config, state types.Map
		labels        map[string]string
		want          string
	}{
		{"create", null, null, map[string]string{"app": "db"}, `{"app":"db"}`},
		{"label added", null, mustMap(t, map[string]string{"app": "db"}), map[string]string{"app": "db", "tier": "x"}, `{"app":"db"}`},
		{"label changed", null, mustMap(t, map[string]string{"app": "db"}), map[string]string{"app": "web"}, `{"app":"web"}`},
		{"set", mustMap(t, map[string]string{"app": "x"}), null, map[string]string{"app": "db"}, `{"app":"x"}`},
		{"no labels", null, null, nil, "<unknown>"},
	} {
		req := planmodifier.MapRequest{ConfigValue: c.config, StateValue: c.state, Plan: plan(c.labels),
			PlanValue: types.MapUnknown(types.StringType)}
		if !c.config.IsNull() {
			req.PlanValue = c.config
		}
		resp := planmodifier.MapResponse{PlanValue: req.PlanValue}
		selectorDefault{labels: labelsPath}.PlanModifyMap(ctx, req, &resp)
		if got := resp.PlanValue.String(); got != c.want {
			t.Errorf("%s: planned %s, want %s", c.name, got, c.want)
		}
	}
}

// emptyValue is an object of s's type with every attribute null.
func emptyValue(t *testing.T, s rschema.Schema) tftypes.Value {
	t.Helper()
	typ := s.Type().TerraformType(context.Background())
	obj, ok := typ.(tftypes.Object)
	if !ok {
		t.Fatalf("schema type %T", typ)
	}
	vals := map[string]tftypes.Value{}
	for k, at := range obj.AttributeTypes {
		vals[k] = tftypes.NewValue(at, nil)
	}
	return tftypes.NewValue(typ, vals)
}
