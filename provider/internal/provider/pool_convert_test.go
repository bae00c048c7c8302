package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

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
