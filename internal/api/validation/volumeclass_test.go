package validation

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func classVolume(name, class string) *apiv1.Volume {
	return &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: class}}
}

func TestVolumeStorageClassUpdate(t *testing.T) {
	root := field.NewPath("spec", "template", "spec")
	spec := func(vols ...*apiv1.Volume) *apiv1.VirtualMachineInstanceSpec {
		return &apiv1.VirtualMachineInstanceSpec{Volumes: vols}
	}
	old := spec(
		&apiv1.Volume{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
		classVolume("data", "ceph"),
		classVolume("scratch", ""),
	)
	for _, tc := range []struct {
		name string
		next *apiv1.VirtualMachineInstanceSpec
		want []string // "field: detail fragment"
	}{
		{"unchanged", proto.Clone(old).(*apiv1.VirtualMachineInstanceSpec), nil},
		{"none and local are one class", spec(classVolume("scratch", StorageClassLocal)), nil},
		{"a new volume on any class", spec(classVolume("data", "ceph"), classVolume("more", "nfs")), nil},
		{"renamed to move", spec(classVolume("data2", "nfs")), nil},
		{"removed", spec(), nil},
		{"no old spec (create)", nil, nil},
		{"moved to another class", spec(old.Volumes[0], classVolume("data", "nfs")), []string{
			`spec.template.spec.volumes[1].persistent.storage_class: may not change from ceph to nfs: the volume "data" exists on its class`,
		}},
		// The index is the new spec's, where the user's value is.
		{"local to a class, moved in the list", spec(classVolume("scratch", "ceph")), []string{
			`spec.template.spec.volumes[0].persistent.storage_class: may not change from local to ceph`,
		}},
		{"a class to none", spec(old.Volumes[0], classVolume("data", "")), []string{
			`spec.template.spec.volumes[1].persistent.storage_class: may not change from ceph to local`,
		}},
		// Another source of the same name is a new disk: not this rule's.
		{"persistent to image", spec(&apiv1.Volume{Name: "data", Image: &apiv1.ImageVolume{Name: "x.qcow2"}}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := tc.next
			from := old
			if next == nil {
				next, from = old, nil
			}
			errs := ValidateVolumeStorageClassUpdate(next, from, root)
			if len(errs) != len(tc.want) {
				t.Fatalf("got %v, want %d errors %q", errs, len(tc.want), tc.want)
			}
			for i, e := range errs {
				f, frag, _ := strings.Cut(tc.want[i], ": ")
				if e.Field != f || e.Type != field.ErrorTypeInvalid || !strings.Contains(e.Detail, frag) {
					t.Errorf("error %d: %s (%s): %s; want %s: …%s…", i, e.Field, e.Type, e.Detail, f, frag)
				}
			}
		})
	}
}

// The API's update checks of VMs and pools ask the rule, naming the field
// where each keeps the instance spec.
func TestUpdatesKeepVolumeStorageClasses(t *testing.T) {
	oldVM := validVM()
	oldVM.Spec.Template.Spec.Volumes[1].Persistent.StorageClass = "ceph"
	vm := proto.Clone(oldVM).(*apiv1.VirtualMachine)
	vm.Spec.Template.Spec.Volumes[1].Persistent.StorageClass = "nfs"
	expectErrors(t, ValidateVirtualMachineUpdate(vm, oldVM, Options{ImageDir: testImageDir}),
		want{field.ErrorTypeInvalid, "spec.template.spec.volumes[1].persistent.storage_class"})
	expectErrors(t, ValidateVirtualMachineUpdate(vm, nil, Options{ImageDir: testImageDir}))

	oldPool := validPool()
	oldPool.Spec.VirtualMachineTemplate.Spec.Template.Spec.Volumes[1].Persistent.StorageClass = "ceph"
	pool := proto.Clone(oldPool).(*apiv1.VirtualMachinePool)
	pool.Spec.VirtualMachineTemplate.Spec.Template.Spec.Volumes[1].Persistent.StorageClass = "local"
	expectErrors(t, ValidatePoolUpdate(pool, oldPool, Options{ImageDir: testImageDir}),
		want{field.ErrorTypeInvalid, poolVMI + ".volumes[1].persistent.storage_class"})
}
