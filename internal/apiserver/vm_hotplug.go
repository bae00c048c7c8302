package apiserver

import (
	"context"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// AddVolume and RemoveVolume: KubeVirt's addvolume and removevolume
// subresources (pkg/virt-api/rest/subresource.go). KubeVirt queues the
// request in the VM's status.volumeRequests for its controller; here the
// template is the one record: the call changes it like an Update would
// (the same defaulting, validation, class checks, snapshot and restore
// locks, compare-and-swap), and the VM controller carries the change to
// the running instance (validation.LiveDisks), whose node plugs or
// unplugs the disk (docs/hotplug.md).

// hotplugRetries bounds the rounds of read, change and compare-and-swap
// a hotplug call makes when the VM is written meanwhile (its controller
// writes its status often).
const hotplugRetries = 5

func (v *vmService) AddVolume(ctx context.Context, req *apiv1.AddVolumeRequest) (*apiv1.VirtualMachine, error) {
	ns, name, err := keyOf(req.GetKey())
	if err != nil {
		return nil, err
	}
	if errs := validation.ValidateAddVolume(req, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindVirtualMachine, name, errs)
	}
	allowed, err := v.s.namespaceAllowed(ctx, ns)
	if err != nil {
		return nil, err
	}
	if errs := validation.CheckNamespaceVolume(ns, allowed, req.GetVolume(), field.NewPath("volume", "storage_class")); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindVirtualMachine, name, errs)
	}
	disk := proto.Clone(req.GetDisk()).(*apiv1.Disk)
	vol := &apiv1.Volume{Name: disk.GetName(), Persistent: proto.Clone(req.GetVolume()).(*apiv1.PersistentVolume)}
	vol.Persistent.Hotpluggable = true
	out, err := v.changeTemplate(ctx, ns, name, func(spec *apiv1.VirtualMachineInstanceSpec) error {
		for _, d := range spec.GetDomain().GetDevices().GetDisks() {
			if d.GetName() == disk.GetName() {
				return validation.ToStatusError(apiv1.KindVirtualMachine, name, field.ErrorList{
					field.Duplicate(field.NewPath("disk", "name"), disk.GetName())})
			}
		}
		for _, v := range spec.GetVolumes() {
			if v.GetName() == disk.GetName() {
				return validation.ToStatusError(apiv1.KindVirtualMachine, name, field.ErrorList{
					field.Duplicate(field.NewPath("disk", "name"), disk.GetName())})
			}
		}
		if spec.Domain == nil {
			spec.Domain = &apiv1.DomainSpec{}
		}
		if spec.Domain.Devices == nil {
			spec.Domain.Devices = &apiv1.Devices{}
		}
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, disk)
		spec.Volumes = append(spec.Volumes, vol)
		return nil
	})
	if err != nil {
		return nil, err
	}
	v.s.log.Info("volume added to virtual machine", "vm", ns+"/"+name, "volume", disk.GetName(),
		"size", vol.Persistent.GetSize(), "storage_class", vol.Persistent.GetStorageClass())
	return out, nil
}

func (v *vmService) RemoveVolume(ctx context.Context, req *apiv1.RemoveVolumeRequest) (*apiv1.VirtualMachine, error) {
	ns, name, err := keyOf(req.GetKey())
	if err != nil {
		return nil, err
	}
	vol := req.GetName()
	if vol == "" {
		return nil, validation.ToStatusError(apiv1.KindVirtualMachine, name, field.ErrorList{field.Required(field.NewPath("name"), "the disk to remove")})
	}
	out, err := v.changeTemplate(ctx, ns, name, func(spec *apiv1.VirtualMachineInstanceSpec) error {
		i := slices.IndexFunc(spec.GetVolumes(), func(x *apiv1.Volume) bool { return x.GetName() == vol })
		if i < 0 {
			e := field.NotFound(field.NewPath("name"), vol)
			e.Detail = "the virtual machine has no volume of this name"
			return validation.ToStatusError(apiv1.KindVirtualMachine, name, field.ErrorList{e})
		}
		if !apiv1.Hotpluggable(spec.Volumes[i]) {
			return status.Errorf(codes.FailedPrecondition, "virtualmachine %q: volume %q is not hotpluggable: remove its disk from the "+
				"spec with an update instead, which takes effect when the VM restarts", apiv1.Ref(ns, name), vol)
		}
		spec.Volumes = slices.Delete(spec.Volumes, i, i+1)
		if d := spec.GetDomain().GetDevices(); d != nil {
			d.Disks = slices.DeleteFunc(d.Disks, func(x *apiv1.Disk) bool { return x.GetName() == vol })
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	v.s.log.Info("volume removed from virtual machine", "vm", ns+"/"+name, "volume", vol)
	return out, nil
}

// changeTemplate reads the VM, applies change to a copy of its template
// and writes it through Update, reading again when the VM was written
// meanwhile. An error of change is returned as it is.
func (v *vmService) changeTemplate(ctx context.Context, ns, name string, change func(spec *apiv1.VirtualMachineInstanceSpec) error) (*apiv1.VirtualMachine, error) {
	var lastErr error
	for range hotplugRetries {
		old, err := v.st.Get(ctx, ns, name)
		if err != nil {
			return nil, toStatus(err)
		}
		in := proto.Clone(old).(*apiv1.VirtualMachine)
		if in.Spec == nil {
			in.Spec = &apiv1.VirtualMachineSpec{}
		}
		if in.Spec.Template == nil {
			in.Spec.Template = &apiv1.VirtualMachineInstanceTemplateSpec{}
		}
		if in.Spec.Template.Spec == nil {
			in.Spec.Template.Spec = &apiv1.VirtualMachineInstanceSpec{}
		}
		if err := change(in.Spec.Template.Spec); err != nil {
			return nil, err
		}
		out, err := v.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: in})
		if status.Code(err) != codes.Aborted {
			return out, err
		}
		lastErr = err
	}
	return nil, lastErr
}
