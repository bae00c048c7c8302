package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// wantInvalid fails unless err is InvalidArgument with a violation of
// field (and none that is Internal).
func wantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	if code(err) != codes.InvalidArgument {
		t.Fatalf("want InvalidArgument naming %s, got %v", field, clipErr(err))
	}
	var got []string
	for _, v := range validation.FieldViolations(err) {
		if v.GetField() == field {
			return
		}
		got = append(got, v.GetField())
	}
	t.Fatalf("no violation of %s in %v (%v)", field, got, clipErr(err))
}

func clipErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	s := err.Error()
	if len(s) > 500 {
		s = s[:500] + "…"
	}
	return s
}

func manyLabels(n int) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[fmt.Sprintf("l%d", i)] = "x"
	}
	return m
}

// Too large is InvalidArgument naming the field, on create and update,
// never Internal (which is what the store answers for a write etcd
// refuses).
func TestVMLimits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	disks := func(vm *apiv1.VirtualMachine, n int) {
		spec := vm.Spec.Template.Spec
		spec.Domain.Devices.Disks, spec.Volumes = nil, nil
		for i := range n {
			name := fmt.Sprintf("d%d", i)
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, &apiv1.Disk{Name: name})
			spec.Volumes = append(spec.Volumes, &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: "1Gi"}})
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(vm *apiv1.VirtualMachine)
		field  string
	}{
		{"labels", func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels = manyLabels(validation.MaxLabels + 1) }, "metadata.labels"},
		{"annotations", func(vm *apiv1.VirtualMachine) {
			vm.Metadata.Annotations = map[string]string{"a": strings.Repeat("x", 256<<10)}
		}, "metadata.annotations"},
		{"template annotations", func(vm *apiv1.VirtualMachine) {
			vm.Spec.Template.Metadata = &apiv1.ObjectMeta{Annotations: manyLabels(validation.MaxAnnotations + 1)}
		}, "spec.template.metadata.annotations"},
		{"disks", func(vm *apiv1.VirtualMachine) { disks(vm, validation.MaxDevices+1) }, "spec.template.spec.domain.devices.disks"},
		{"user data", func(vm *apiv1.VirtualMachine) {
			spec := vm.Spec.Template.Spec
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, &apiv1.Disk{Name: "ci", Cdrom: &apiv1.CDRomTarget{}})
			spec.Volumes = append(spec.Volumes, &apiv1.Volume{Name: "ci", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: strings.Repeat("x", 64<<10+1)}})
		}, "spec.template.spec.volumes[1].cloud_init_no_cloud.user_data"},
		{"name", func(vm *apiv1.VirtualMachine) { vm.Metadata.Name = strings.Repeat("a", 64) }, "metadata.name"},
		{"cmdline", func(vm *apiv1.VirtualMachine) {
			vm.Spec.Template.Spec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "k", Cmdline: strings.Repeat("x", 4097)}}
		}, "spec.template.spec.domain.firmware.kernel_boot.cmdline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := validVM("lim-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"))
			tc.mutate(vm)
			_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
			wantInvalid(t, err, tc.field)
			if tc.name == "name" {
				return
			}
			// The same through an update of a VM that exists.
			stored, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM(vm.Metadata.Name)})
			if err != nil {
				t.Fatal(err)
			}
			vm.Metadata = proto.Clone(stored.Metadata).(*apiv1.ObjectMeta)
			tc.mutate(vm)
			_, err = f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: vm})
			wantInvalid(t, err, tc.field)
		})
	}
}

// A VM with every field at its limit at once is stored: the limits fit
// what etcd takes in one write, so no valid VM meets an Internal error.
func TestLargestVMIsStored(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	vm := largestVM()
	if n := proto.Size(vm); n < validation.MaxObjectBytes*9/10 {
		t.Fatalf("the largest VM is only %d bytes", n)
	}
	out, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	if err != nil {
		t.Fatalf("create: %v", clipErr(err))
	}
	// Its instance, as the VM controller makes it (the template with the
	// VM's labels, a status), is stored too.
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: out.Metadata.Name,
			Labels: out.Spec.Template.Metadata.Labels, Annotations: out.Spec.Template.Metadata.Annotations},
		Spec:   out.Spec.Template.Spec,
		Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhasePending},
	}
	if _, err := f.st.VMIs.Create(ctx, vmi); err != nil {
		t.Fatalf("instance: %v", clipErr(err))
	}
}

// largestVM has every field of the spec at its limit.
func largestVM() *apiv1.VirtualMachine {
	vm := validVM("largest")
	key := func(p string, i int) string {
		return fmt.Sprintf("%s/%s%05d", strings.Repeat("p", 253), strings.Repeat(p, 58), i)
	}
	labels := func(p string) map[string]string {
		m := map[string]string{}
		for i := range validation.MaxLabels {
			m[key(p, i)] = strings.Repeat("v", 63)
		}
		return m
	}
	annotations := func() map[string]string {
		m := map[string]string{}
		for i := range 8 {
			k := fmt.Sprintf("a%d", i)
			m[k] = strings.Repeat("x", 32<<10-len(k))
		}
		return m
	}
	image := func(i int) string {
		var parts []string
		rest := 4096
		for rest > 255 {
			parts = append(parts, strings.Repeat("d", 254))
			rest -= 255
		}
		last := fmt.Sprintf("%05d", i)
		return strings.Join(append(parts, strings.Repeat("f", rest-len(last))+last), "/")
	}
	vm.Metadata.Labels, vm.Metadata.Annotations = labels("l"), annotations()
	vm.Spec.Template.Metadata = &apiv1.ObjectMeta{Labels: labels("t"), Annotations: annotations()}
	spec := vm.Spec.Template.Spec
	spec.NodeSelector = labels("s")
	spec.Domain.Devices.Disks, spec.Volumes = nil, nil
	for i := range validation.MaxDevices {
		name := fmt.Sprintf("v%02d", i)
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, &apiv1.Disk{Name: name, Serial: strings.Repeat("s", 20)})
		v := &apiv1.Volume{Name: name, Image: &apiv1.ImageVolume{Name: image(i)}}
		if i == 0 {
			v = &apiv1.Volume{Name: name, CloudInitNoCloud: &apiv1.CloudInitNoCloud{
				UserData: strings.Repeat("u", 64<<10), NetworkData: strings.Repeat("n", 64<<10)}}
		}
		spec.Volumes = append(spec.Volumes, v)
	}
	for i := range validation.MaxDevices {
		name := fmt.Sprintf("n%02d", i)
		spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, &apiv1.Interface{Name: name, MacAddress: fmt.Sprintf("02:00:00:00:01:%02x", i)})
		spec.Networks = append(spec.Networks, &apiv1.Network{Name: name, User: &apiv1.UserNetwork{}})
	}
	spec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: image(1000), Initrd: image(1001), Cmdline: strings.Repeat("c", 4096)}}
	return vm
}

// A stop or restart cannot set a grace period a node cannot count: a
// period that wraps around time.Duration would kill the guest at once.
func TestVerbGraceLimit(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")}); err != nil {
		t.Fatal(err)
	}
	huge := int64(1e11)
	_, err := f.vms.Stop(ctx, &apiv1.StopVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}, GracePeriodSeconds: &huge})
	wantInvalid(t, err, "grace_period_seconds")
	_, err = f.vms.Restart(ctx, &apiv1.RestartVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}, GracePeriodSeconds: &huge})
	wantInvalid(t, err, "grace_period_seconds")
	vm, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}})
	if err != nil || vm.Spec.RunStrategy != "Always" {
		t.Fatalf("a refused stop changed the VM: %v %v", err, vm.GetSpec())
	}
}
