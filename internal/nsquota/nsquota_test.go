package nsquota

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func ptr[T any](v T) *T { return &v }

func vm(sockets, cores, threads int32, mem string, vols ...*apiv1.PersistentVolume) *apiv1.VirtualMachine {
	spec := &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{
		Cpu:    &apiv1.CPU{Sockets: sockets, Cores: cores, Threads: threads},
		Memory: &apiv1.Memory{Guest: mem},
	}}
	for _, v := range vols {
		spec.Volumes = append(spec.Volumes, &apiv1.Volume{Name: "v", Persistent: v})
	}
	return &apiv1.VirtualMachine{Spec: &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: spec}}}
}

func TestOfVM(t *testing.T) {
	got := OfVM(vm(2, 0, 2, "1Gi",
		&apiv1.PersistentVolume{Size: "10Gi", StorageClass: "ceph"},
		&apiv1.PersistentVolume{Size: "1Gi", StorageClass: "local"},
		&apiv1.PersistentVolume{Size: "2Gi"}))
	want := Usage{VCPUs: 4, Memory: 1 << 30, VMs: 1, Storage: map[string]int64{"ceph": 10 << 30, "": 3 << 30}}
	if !got.Equal(want) {
		t.Fatalf("OfVM = %v, want %v", got, want)
	}
	// Defaults: an unset topology is one vCPU.
	if got := OfVM(vm(0, 0, 0, "")); got.VCPUs != 1 || got.VMs != 1 || got.Memory != 0 {
		t.Fatalf("OfVM(defaults) = %v", got)
	}
}

func TestOfVMI(t *testing.T) {
	spec := vm(1, 2, 1, "512Mi").Spec.Template.Spec
	bare := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{}, Spec: spec}
	if got := OfVMI(bare); !got.Equal(Usage{VCPUs: 2, Memory: 512 << 20, VMs: 1}) {
		t.Fatalf("OfVMI(replica set's) = %v", got)
	}
	owned := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{OwnerReferences: []*apiv1.OwnerReference{
		{Kind: apiv1.KindVirtualMachine, Uid: "u", Controller: true}}}, Spec: spec}
	if got := OfVMI(owned); !got.IsZero() {
		t.Fatalf("OfVMI(VM's instance) = %v, want nothing (its VM is counted)", got)
	}
}

func TestOfImage(t *testing.T) {
	img := &apiv1.Image{Metadata: &apiv1.ObjectMeta{Labels: map[string]string{apiv1.LabelOwnerNamespace: "a"}}}
	if ImageNamespace(img) != "a" || OfImage(img).Images != 1 {
		t.Fatalf("image of a: %q %v", ImageNamespace(img), OfImage(img))
	}
	if got := OfImage(&apiv1.Image{Metadata: &apiv1.ObjectMeta{}}); !got.IsZero() {
		t.Fatalf("cluster image = %v", got)
	}
}

func TestAddSubRoundTrip(t *testing.T) {
	a := Usage{VCPUs: 3, Memory: 5 << 30, VMs: 2, Storage: map[string]int64{"": 1 << 30, "ceph": 7}}
	b := Usage{VCPUs: 1, Memory: 1 << 30, VMs: 1, Storage: map[string]int64{"": 1 << 30}}
	if got := a.Add(b).Sub(b); !got.Equal(a) {
		t.Fatalf("a+b-b = %v, want %v", got, a)
	}
	d := a.Sub(b)
	if _, ok := d.Storage[""]; ok {
		t.Fatalf("a class at zero stays in %v", d)
	}
	api := a.ToAPI()
	if api.Memory != "5Gi" || api.PersistentStorage[""] != "1Gi" {
		t.Fatalf("ToAPI = %v", api)
	}
	if got := FromAPI(api); !got.Equal(a) {
		t.Fatalf("FromAPI(ToAPI(a)) = %v, want %v", got, a)
	}
}

func TestCheck(t *testing.T) {
	q := &apiv1.NamespaceQuota{Vcpus: ptr[int64](16), Memory: ptr("8Gi"), Vms: ptr[int64](5),
		PersistentStorage: map[string]string{"": "10Gi"}}
	used := Usage{VCPUs: 14, Memory: 4 << 30, VMs: 5, Storage: map[string]int64{"": 9 << 30}}
	got := Check(q, used, Usage{VCPUs: 4, Memory: 1 << 30, VMs: 1, Storage: map[string]int64{"": 2 << 30, "ceph": 1 << 40}})
	want := `namespace a: exceeded quota: vcpus: requested 4, used 14, limited 16; vms: requested 1, used 5, limited 5; persistent_storage[""]: requested 2Gi, used 9Gi, limited 10Gi`
	if m := Message("a", got); m != want {
		t.Fatalf("Message =\n%s\nwant\n%s", m, want)
	}
	// Decreases pass, even below a lowered quota; up to the bound passes.
	if got := Check(q, Usage{VCPUs: 20, VMs: 9}, Usage{VCPUs: -2, VMs: -1}); len(got) != 0 {
		t.Fatalf("decrease refused: %v", got)
	}
	if got := Check(q, Usage{VCPUs: 12}, Usage{VCPUs: 4, Memory: 8 << 30}); len(got) != 0 {
		t.Fatalf("up to the bound refused: %v", got)
	}
	local := &apiv1.NamespaceQuota{PersistentStorage: map[string]string{"local": "1Gi"}}
	if got := Check(local, Usage{}, Usage{Storage: map[string]int64{"": 2 << 30}}); len(got) != 1 {
		t.Fatalf(`a quota on "local" does not bound the node's disk: %v`, got)
	}
	if got := Check(nil, used, Usage{VCPUs: 100}); len(got) != 0 {
		t.Fatalf("no quota refused: %v", got)
	}
	if got := Check(&apiv1.NamespaceQuota{Images: ptr[int64](0)}, Usage{}, Usage{Images: 1}); len(got) != 1 || got[0].Resource != "images" {
		t.Fatalf("images 0 = %v", got)
	}
}
