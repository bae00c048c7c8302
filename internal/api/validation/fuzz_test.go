package validation

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// fuzzSeeds are JSON VMs as users write them, valid and not.
var fuzzSeeds = []string{
	`{}`,
	`{"metadata":{},"spec":{}}`,
	`{"metadata":{"name":"web"},"spec":{"run_strategy":"Always","template":{"spec":{"domain":{"memory":{"guest":"1Gi"}}}}}}`,
	`{"metadata":{"name":"web","namespace":"prod","labels":{"app":"web"}},"spec":{"running":true,"template":{"spec":{
	  "domain":{"cpu":{"cores":2},"memory":{"guest":"1024Mi"},"devices":{
	    "disks":[{"name":"root","boot_order":1},{"name":"ci","cdrom":{}}],
	    "interfaces":[{"name":"default","mac_address":"02:00:00:00:00:01"}]}},
	  "volumes":[{"name":"root","image":{"name":"debian-12.qcow2"}},{"name":"ci","cloud_init_no_cloud":{"user_data":"#cloud-config\n"}}],
	  "networks":[{"name":"default","user":{}}]}}}}`,
	`{"metadata":{"name":"Web_1","namespace":"x y"},"spec":{"running":false,"run_strategy":"WaitAsReceiver","node_failure_policy":"Never"}}`,
	`{"metadata":{"name":"db"},"spec":{"run_strategy":"Manual","template":{"spec":{
	  "domain":{"cpu":{"cores":-1,"sockets":2147483647,"threads":2147483647},"memory":{"guest":"1e-999999999"},
	    "devices":{"disks":[{"name":"a","disk":{"bus":"ide"},"cdrom":{"bus":"virtio"},"boot_order":-3},{"name":"a"},{}],
	    "interfaces":[{"name":"n","model":"ne2k","mac_address":"ff:ff:ff:ff:ff:ff"},{"name":"n"}]},
	    "firmware":{"kernel_boot":{"kernel":"../../boot/vmlinuz","initrd":"/boot/initrd","cmdline":"a\u0000b"}}},
	  "volumes":[{"name":"a","image":{"name":"/etc/shadow"},"persistent":{"size":"-1","image":".."}},{"name":"b"},{"name":"a","cloud_init_no_cloud":{}}],
	  "networks":[{"name":"n"},{"name":"n","user":{}}],
	  "node_selector":{"bad key":"bad value"},"termination_grace_period_seconds":-5,"eviction_strategy":"Evict"}}}}`,
	`{"metadata":{"name":"q"},"spec":{"run_strategy":"Once","template":{"spec":{"domain":{"memory":{"guest":"+01.5Gi"}},
	  "volumes":[{"name":"d","persistent":{"size":"0.5Ti"}}]}}}}`,
	`{"spec":{"template":{"spec":{"domain":{"devices":{"disks":[{}],"interfaces":[{}]}},"volumes":[{}],"networks":[{}]}}}}`,
}

func FuzzValidateVirtualMachine(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	valid, err := proto.Marshal(validVM())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	validJSON, err := protojson.Marshal(validVM())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(validJSON)

	f.Fuzz(fuzzOne)
}

func fuzzOne(t *testing.T, data []byte) {
	vm := &apiv1.VirtualMachine{}
	if protojson.Unmarshal(data, vm) == nil {
		checkVM(t, vm)
	}
	vm = &apiv1.VirtualMachine{}
	if proto.Unmarshal(data, vm) == nil {
		checkVM(t, vm)
	}
}

// checkVM runs the server's create and update paths over vm and checks the
// invariants that hold for any input.
func checkVM(t *testing.T, vm *apiv1.VirtualMachine) {
	opts := Options{ImageDir: testImageDir}
	rawErrs := ValidateVirtualMachine(vm, opts)
	_ = ValidateVirtualMachine(vm, Options{})

	DefaultVirtualMachine(vm)
	once := proto.Clone(vm)
	DefaultVirtualMachine(vm)
	if !proto.Equal(vm, once) {
		t.Fatalf("defaulting is not idempotent:\n once  %v\n twice %v", once, vm)
	}
	if _, err := proto.Marshal(vm); err != nil {
		t.Fatalf("defaulted VM does not marshal: %v", err)
	}

	errs := ValidateVirtualMachine(vm, opts)
	if len(rawErrs) == 0 && len(errs) != 0 {
		t.Fatalf("valid VM invalid after defaulting: %v", errs)
	}
	for _, e := range errs {
		if e == nil || !(strings.HasPrefix(e.Field, "metadata") || strings.HasPrefix(e.Field, "spec")) {
			t.Fatalf("bad error %v", e)
		}
	}
	if len(errs) == 0 {
		// A stored VM's quantities are canonical.
		guest := vm.Spec.Template.Spec.Domain.Memory.Guest
		if c, err := CanonicalQuantity(guest); err != nil || c != guest {
			t.Fatalf("memory %q stored, canonical %q (%v)", guest, c, err)
		}
		checkStorable(t, vm)
	}

	_ = ValidateVirtualMachineUpdate(vm, validVM(), opts)
	_ = ValidateVirtualMachineUpdate(validVM(), vm, opts)
	_ = ValidateVirtualMachineUpdate(vm, vm, opts)
	_ = ValidateVirtualMachineInstanceSpec(vm.Spec.Template.Spec, nil, opts)

	err := ToStatusError("VirtualMachine", vm.GetMetadata().GetName(), errs)
	if got, want := len(FieldViolations(err)), min(len(errs), maxReportedErrors); got != want {
		t.Fatalf("%d violations for %d errors", got, len(errs))
	}

	vmi := &apiv1.VirtualMachineInstance{Spec: proto.Clone(vm.Spec.Template.Spec).(*apiv1.VirtualMachineInstanceSpec)}
	DefaultVirtualMachineInstance(vmi)
	_ = ValidateVirtualMachineInstanceSpec(vmi.Spec, nil, Options{})
}

// checkStorable checks what holds for every VM validation accepts: it
// fits the store (MaxObjectBytes), carries nothing the schema does not
// know, its lists are bounded, and every image it names resolves inside
// the image directory to a valid image name (never a store file).
func checkStorable(t *testing.T, vm *apiv1.VirtualMachine) {
	t.Helper()
	if n := proto.Size(vm); n > MaxObjectBytes {
		t.Fatalf("valid VM of %d bytes", n)
	}
	if len(vm.ProtoReflect().GetUnknown()) > 0 {
		t.Fatal("valid VM keeps unknown fields")
	}
	spec := vm.Spec.Template.Spec
	if len(spec.Volumes) > MaxDevices || len(spec.Domain.Devices.Disks) > MaxDevices || len(vm.Metadata.Labels) > MaxLabels {
		t.Fatal("valid VM over a count limit")
	}
	refs := []string{spec.Domain.GetFirmware().GetKernelBoot().GetKernel(), spec.Domain.GetFirmware().GetKernelBoot().GetInitrd()}
	for _, v := range spec.Volumes {
		refs = append(refs, v.GetImage().GetName(), v.GetPersistent().GetImage())
	}
	for _, ref := range refs {
		if ref == "" {
			continue
		}
		p, err := ResolveImagePath(testImageDir, ref)
		if err != nil {
			t.Fatalf("valid VM names image %q, which does not resolve: %v", ref, err)
		}
		name, ok := ImageName(ref, testImageDir)
		if !ok || filepath.Join(testImageDir, name) != p || len(ValidateImageName(name, nil)) > 0 {
			t.Fatalf("valid VM names image %q, which resolves to %q outside the rule (%q)", ref, p, name)
		}
	}
}

// replicaSeeds are JSON replica sets and pools (the fields of one kind are
// unknown to the other, which then fails to parse: harmless).
var replicaSeeds = []string{
	`{}`,
	`{"spec":{"replicas":-1,"selector":{},"template":{}}}`,
	`{"metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"match_labels":{"app":"web"}},
	  "template":{"metadata":{"labels":{"app":"web"}},"spec":{"domain":{"memory":{"guest":"256Mi"}}}}}}`,
	`{"metadata":{"name":"db"},"spec":{"selector":{"match_labels":{"app":"db"}},"max_unavailable":"0%","scale_in_order":"Random",
	  "virtual_machine_template":{"metadata":{"labels":{"app":"db"}},"spec":{"run_strategy":"Always","template":{"spec":{
	    "domain":{"memory":{"guest":"1Gi"},"devices":{"disks":[{"name":"d"}],"interfaces":[{"name":"n","mac_address":"02:00:00:00:00:01"}]}},
	    "volumes":[{"name":"d","persistent":{"size":"1Gi"}}],"networks":[{"name":"n","user":{}}]}}}}}}`,
}

func FuzzValidateReplicaSet(f *testing.F) {
	addReplicaSeeds(f, validRS())
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, rs := range []*apiv1.VirtualMachineInstanceReplicaSet{{}, {}} {
			if unmarshalEither(data, rs) {
				checkReplicaSet(t, rs)
			}
		}
	})
}

func FuzzValidatePool(f *testing.F) {
	addReplicaSeeds(f, validPool())
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, p := range []*apiv1.VirtualMachinePool{{}, {}} {
			if unmarshalEither(data, p) {
				checkPool(t, p)
			}
		}
	})
}

func addReplicaSeeds(f *testing.F, valid proto.Message) {
	for _, s := range replicaSeeds {
		f.Add([]byte(s))
	}
	for _, marshal := range []func(proto.Message) ([]byte, error){proto.Marshal, protojson.Marshal} {
		b, err := marshal(valid)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// unmarshalEither fills m from data as JSON, else as protobuf (the two
// calls of the fuzz function use fresh messages).
func unmarshalEither(data []byte, m proto.Message) bool {
	return protojson.Unmarshal(data, m) == nil || proto.Unmarshal(data, m) == nil
}

func checkReplicaSet(t *testing.T, rs *apiv1.VirtualMachineInstanceReplicaSet) {
	raw := ValidateReplicaSet(rs, Options{})
	DefaultReplicaSet(rs)
	once := proto.Clone(rs)
	DefaultReplicaSet(rs)
	if !proto.Equal(rs, once) {
		t.Fatalf("defaulting is not idempotent:\n once  %v\n twice %v", once, rs)
	}
	errs := ValidateReplicaSet(rs, Options{})
	checkReplicaErrors(t, raw, errs)
	_ = ValidateReplicaSetUpdate(rs, validRS(), Options{})
	_ = ValidateReplicaSetUpdate(validRS(), rs, Options{})
	if len(errs) > 0 {
		return
	}
	// What holds for every accepted replica set: its instances' names are
	// DNS labels, they count as its own, and none carries what the others
	// have too.
	tmpl := rs.Spec.Template
	n := rs.Spec.GetReplicas()
	if len(apiv1.ReplicaSetInstanceName(rs.Metadata.Name)) > 63 || !rs.Spec.Selector.Matches(tmpl.Metadata.Labels) || n < 0 || n > MaxReplicas {
		t.Fatalf("accepted %v", rs)
	}
	checkReplicaTemplate(t, tmpl.Spec, false)
	if proto.Size(rs) > MaxObjectBytes {
		t.Fatal("accepted an object over MaxObjectBytes")
	}
}

func checkPool(t *testing.T, p *apiv1.VirtualMachinePool) {
	raw := ValidatePool(p, Options{})
	DefaultPool(p)
	once := proto.Clone(p)
	DefaultPool(p)
	if !proto.Equal(p, once) {
		t.Fatalf("defaulting is not idempotent:\n once  %v\n twice %v", once, p)
	}
	errs := ValidatePool(p, Options{})
	checkReplicaErrors(t, raw, errs)
	_ = ValidatePoolUpdate(p, validPool(), Options{})
	_ = ValidatePoolUpdate(validPool(), p, Options{})
	if len(errs) > 0 {
		return
	}
	// Every VM the pool can make is a valid VM of its own.
	vt := p.Spec.VirtualMachineTemplate
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: p.Metadata.Namespace, Name: apiv1.PoolVMName(p.Metadata.Name, 99999), Labels: vt.Metadata.Labels},
		Spec:     vt.Spec,
	}
	if errs := ValidateVirtualMachine(vm, Options{}); len(errs) > 0 || !p.Spec.Selector.Matches(vm.Metadata.Labels) {
		t.Fatalf("accepted a pool whose VM is invalid or not its own: %v", errs)
	}
	if _, err := apiv1.MaxUnavailableCount(p.Spec.MaxUnavailable, p.Spec.GetReplicas()); err != nil {
		t.Fatal(err)
	}
	checkReplicaTemplate(t, vt.Spec.Template.Spec, true)
}

// checkReplicaErrors: a valid object stays valid once defaulted, and every
// error names a field of the object.
func checkReplicaErrors(t *testing.T, raw, errs field.ErrorList) {
	if len(raw) == 0 && len(errs) != 0 {
		t.Fatalf("valid object invalid after defaulting: %v", errs)
	}
	for _, e := range errs {
		if e == nil || !(strings.HasPrefix(e.Field, "metadata") || strings.HasPrefix(e.Field, "spec")) {
			t.Fatalf("bad error %v", e)
		}
	}
}

// checkReplicaTemplate: no MAC address, and persistent volumes only where
// a VM keeps them.
func checkReplicaTemplate(t *testing.T, spec *apiv1.VirtualMachineInstanceSpec, persistentOK bool) {
	for _, i := range spec.GetDomain().GetDevices().GetInterfaces() {
		if i.GetMacAddress() != "" {
			t.Fatalf("accepted a template with MAC %s", i.GetMacAddress())
		}
	}
	if !persistentOK && apiv1.HasLocalVolumes(spec) {
		t.Fatal("accepted a replica set template with a persistent volume")
	}
}

// The seeds are only useful if they parse; the valid ones must be valid.
func TestFuzzSeedsParse(t *testing.T) {
	valid := map[int]bool{2: true, 3: true}
	for i, s := range fuzzSeeds {
		vm := &apiv1.VirtualMachine{}
		if err := protojson.Unmarshal([]byte(s), vm); err != nil {
			t.Errorf("seed %d: %v", i, err)
			continue
		}
		DefaultVirtualMachine(vm)
		if errs := ValidateVirtualMachine(vm, Options{}); (len(errs) == 0) != valid[i] {
			t.Errorf("seed %d: valid %v, errors %v", i, valid[i], errs)
		}
	}
}

// The committed corpus files named valid_* must stay valid, so the fuzzer
// starts from inputs that reach every rule.
func TestFuzzCorpusValid(t *testing.T) {
	files, err := filepath.Glob("testdata/fuzz/FuzzValidateVirtualMachine/valid_*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no valid corpus files (%v)", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		data, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[len(lines)-1], "[]byte("), ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		vm := &apiv1.VirtualMachine{}
		if err := protojson.Unmarshal([]byte(data), vm); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		DefaultVirtualMachine(vm)
		if errs := ValidateVirtualMachine(vm, Options{ImageDir: testImageDir}); len(errs) != 0 {
			t.Errorf("%s: %v", f, errs)
		}
	}
}
