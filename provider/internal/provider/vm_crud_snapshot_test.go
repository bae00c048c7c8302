package provider

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// A VM made by a clone keeps the MACs the clone gave the interfaces the
// configuration leaves without one, and takes the configuration's spec.
func TestMergeCloned(t *testing.T) {
	iface := func(name, mac string) *apiv1.Interface { return &apiv1.Interface{Name: name, MacAddress: mac} }
	vm := func(strategy string, ifaces ...*apiv1.Interface) *apiv1.VirtualMachine {
		return &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: &apiv1.VirtualMachineSpec{RunStrategy: strategy, Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{Interfaces: ifaces}}}}}}
	}
	cur := vm(apiv1.RunStrategyHalted, iface("default", "02:00:00:00:00:01"), iface("lan", "02:00:00:00:00:02"))
	cur.Metadata.Annotations = map[string]string{apiv1.AnnotationLastRestore: "clone-u-restore-x"}
	want := vm(apiv1.RunStrategyAlways, iface("default", ""), iface("lan", "02:aa:00:00:00:09"), iface("new", ""))
	want.Metadata.Labels = map[string]string{"app": "web"}
	got := mergeCloned(cur, want)
	ifaces := got.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces()
	if ifaces[0].GetMacAddress() != "02:00:00:00:00:01" || ifaces[1].GetMacAddress() != "02:aa:00:00:00:09" || ifaces[2].GetMacAddress() != "" {
		t.Errorf("interfaces %v", ifaces)
	}
	if got.GetSpec().GetRunStrategy() != apiv1.RunStrategyAlways || got.GetMetadata().GetLabels()["app"] != "web" ||
		got.GetMetadata().GetAnnotations()[apiv1.AnnotationLastRestore] == "" {
		t.Errorf("merged %v", got)
	}
	if m := configuredMACs(want); len(m) != 1 || m["lan"] != "02:aa:00:00:00:09" {
		t.Errorf("configuredMACs = %v", m)
	}
}
