package apiserver

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Issue 13: image names that name the image store's own files
// (".hidden.info.json", a checksum sidecar) or are not in clean form
// ("sub/./x") passed the API; they follow the store's rule now, in every
// place a spec names an image.
func TestImageNamesFollowTheStoreRule(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, name := range []string{".hidden.info.json", "sub/./x", ".debian.qcow2.tmp-1", "os/.base.raw.info.json", "./x", "a//b"} {
		for _, tc := range []struct {
			where  string
			mutate func(vm *apiv1.VirtualMachine)
			field  string
		}{
			{"image volume", func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Spec.Volumes[0].Image.Name = name },
				"spec.template.spec.volumes[0].image.name"},
			{"persistent image", func(vm *apiv1.VirtualMachine) {
				vm.Spec.Template.Spec.Volumes[0] = &apiv1.Volume{Name: "root", Persistent: &apiv1.PersistentVolume{Size: "1Gi", Image: name}}
			}, "spec.template.spec.volumes[0].persistent.image"},
			{"kernel", func(vm *apiv1.VirtualMachine) {
				vm.Spec.Template.Spec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: name}}
			}, "spec.template.spec.domain.firmware.kernel_boot.kernel"},
			{"initrd", func(vm *apiv1.VirtualMachine) {
				vm.Spec.Template.Spec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "vmlinuz", Initrd: name}}
			}, "spec.template.spec.domain.firmware.kernel_boot.initrd"},
		} {
			t.Run(tc.where+" "+name, func(t *testing.T) {
				vm := validVM("img")
				tc.mutate(vm)
				_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
				wantInvalid(t, err, tc.field)
			})
		}
		_, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: nodeWithImages("host-1", image(name, 1))})
		wantInvalid(t, err, "status.images[0].name")
	}
}

// A uid a request carries is a UUID, and a key names an object the API
// could have stored: anything else is InvalidArgument, before the store.
func TestRequestUIDsAndKeys(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	vm, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")})
	if err != nil {
		t.Fatal(err)
	}
	upd := validVM("web")
	upd.Metadata.Uid, upd.Metadata.ResourceVersion = "../../003/victim", vm.Metadata.ResourceVersion
	_, err = f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd})
	wantInvalid(t, err, "metadata.uid")

	_, err = f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}, Options: &apiv1.DeleteOptions{Uid: "../x"}})
	wantInvalid(t, err, "options.uid")
	if _, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}}); err != nil {
		t.Fatalf("refused delete deleted: %v", err)
	}
	_, err = f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}, Options: &apiv1.DeleteOptions{Uid: vm.Metadata.Uid}})
	if err != nil {
		t.Fatalf("delete with the right uid: %v", err)
	}

	for _, key := range []*apiv1.ObjectKey{{Name: "../web"}, {Name: "Web"}, {Namespace: "a/b", Name: "web"}, {Name: ""}} {
		_, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
		field := "key.name"
		if key.Namespace != "" {
			field = "key.namespace"
		}
		wantInvalid(t, err, field)
	}
}

// A label selector is matched against every object listed and every
// event watched: one past its bounds is refused before any of that.
func TestLabelSelectorLimits(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var terms []string
	for i := range validation.MaxLabels + 1 {
		terms = append(terms, fmt.Sprintf("l%d=x", i))
	}
	huge := strings.Join(terms, ",")
	_, err := f.vms.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{LabelSelector: huge}})
	wantInvalid(t, err, "options.label_selector")
	_, err = f.nodes.List(ctx, &apiv1.ListNodesRequest{LabelSelector: strings.Repeat("a", 9000)})
	wantInvalid(t, err, "label_selector")
	for _, watch := range []func() error{
		func() error {
			s, err := f.vms.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: &apiv1.WatchOptions{LabelSelector: huge}})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
		func() error {
			s, err := f.nodes.Watch(ctx, &apiv1.WatchNodesRequest{Options: &apiv1.WatchOptions{LabelSelector: huge}})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
	} {
		wantInvalid(t, watch(), "options.label_selector")
	}
	if _, err := f.vms.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{LabelSelector: "app=web"}}); err != nil {
		t.Fatalf("a plain selector: %v", err)
	}
}
