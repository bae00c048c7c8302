package pool

import (
	"maps"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/macaddr"
)

// newVM is the pool's VM named name, made from its template of revision
// rev and controlled by the pool.
func newVM(pool *apiv1.VirtualMachinePool, name, rev string) *apiv1.VirtualMachine {
	md := pool.GetMetadata()
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{
			Namespace: md.GetNamespace(), Name: name,
			OwnerReferences: []*apiv1.OwnerReference{{
				Kind: apiv1.KindPool, Name: md.GetName(), Uid: md.GetUid(), Controller: true,
			}},
		},
	}
	applyTemplate(vm, pool.GetSpec().GetVirtualMachineTemplate(), rev)
	return vm
}

// applyTemplate makes vm what template of revision rev says, keeping its
// name, owner, finalizers and status: labels and annotations are the
// template's plus LabelPoolRevision, which the VM's instance template
// carries too so its instances say which template they run. A spec change
// bumps the generation, as the API's update does. vm's MAC addresses are
// kept (by interface name), and interfaces without one get one, as the
// API gives a VM it creates: a pool VM keeps its MACs across rollouts,
// so DHCP leases and ARP entries outside keep pointing at it.
func applyTemplate(vm *apiv1.VirtualMachine, template *apiv1.VirtualMachineTemplateSpec, rev string) {
	md := vm.Metadata
	md.Labels = maps.Clone(template.GetMetadata().GetLabels())
	if md.Labels == nil {
		md.Labels = map[string]string{}
	}
	md.Labels[apiv1.LabelPoolRevision] = rev
	md.Annotations = maps.Clone(template.GetMetadata().GetAnnotations())

	spec, _ := proto.Clone(template.GetSpec()).(*apiv1.VirtualMachineSpec)
	if spec == nil {
		spec = &apiv1.VirtualMachineSpec{}
	}
	if spec.Template == nil {
		spec.Template = &apiv1.VirtualMachineInstanceTemplateSpec{}
	}
	if spec.Template.Metadata == nil {
		spec.Template.Metadata = &apiv1.ObjectMeta{}
	}
	if spec.Template.Metadata.Labels == nil {
		spec.Template.Metadata.Labels = map[string]string{}
	}
	spec.Template.Metadata.Labels[apiv1.LabelPoolRevision] = rev
	// The pool writes VMs to the store, not through the API: it gives
	// them their MACs as the API would, kept across template updates.
	macaddr.Assign(spec.GetTemplate().GetSpec(), vm.GetSpec().GetTemplate().GetSpec())
	if vm.Spec != nil && !proto.Equal(vm.Spec, spec) {
		md.Generation++
	}
	vm.Spec = spec
}
