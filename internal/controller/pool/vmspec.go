package pool

import (
	"crypto/rand"
	"maps"
	"net"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
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
	assignMACs(spec.GetTemplate().GetSpec(), vm.GetSpec().GetTemplate().GetSpec())
	if vm.Spec != nil && !proto.Equal(vm.Spec, spec) {
		md.Generation++
	}
	vm.Spec = spec
}

// assignMACs gives every interface of spec that names no MAC address the
// one it had in old (by interface name), else a new random locally
// administered one: the API server's rule for the VMs it creates and
// updates (apiserver assignMACs), which the pool's VMs, written here and
// not through the API, must follow too.
func assignMACs(spec, old *apiv1.VirtualMachineInstanceSpec) {
	kept := map[string]string{}
	for _, i := range old.GetDomain().GetDevices().GetInterfaces() {
		if i.GetMacAddress() != "" {
			kept[i.GetName()] = i.GetMacAddress()
		}
	}
	used := map[string]bool{}
	for _, i := range spec.GetDomain().GetDevices().GetInterfaces() {
		if hw, err := net.ParseMAC(i.GetMacAddress()); err == nil {
			used[hw.String()] = true
		}
	}
	for _, i := range spec.GetDomain().GetDevices().GetInterfaces() {
		if i == nil || i.GetMacAddress() != "" {
			continue
		}
		if mac, ok := kept[i.GetName()]; ok && !used[mac] {
			i.MacAddress, used[mac] = mac, true
			continue
		}
		for {
			if mac := randomMAC(); !used[mac] {
				i.MacAddress, used[mac] = mac, true
				break
			}
		}
	}
}

// randomMAC is a random unicast MAC with the locally administered bit set.
func randomMAC() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	b[0] = b[0]&^0x01 | 0x02
	return net.HardwareAddr(b).String()
}
