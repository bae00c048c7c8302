package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

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
