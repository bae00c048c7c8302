package validation

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Object limits (issue 13): each list and map of a VM is bounded, and a
// too-large one is an error naming its field.
func TestValidateVirtualMachineLimits(t *testing.T) {
	labels := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("l%d", i)] = "x"
		}
		return m
	}
	mkDisks := func(n int) ([]*apiv1.Disk, []*apiv1.Volume) {
		var ds []*apiv1.Disk
		var vs []*apiv1.Volume
		for i := range n {
			name := fmt.Sprintf("d%d", i)
			ds = append(ds, &apiv1.Disk{Name: name})
			vs = append(vs, &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: "1Gi"}})
		}
		return ds, vs
	}
	nics := func(n int) ([]*apiv1.Interface, []*apiv1.Network) {
		var is []*apiv1.Interface
		var ns []*apiv1.Network
		for i := range n {
			name := fmt.Sprintf("n%d", i)
			is = append(is, &apiv1.Interface{Name: name})
			ns = append(ns, &apiv1.Network{Name: name, User: &apiv1.UserNetwork{}})
		}
		return is, ns
	}
	cases := []vmCase{
		{name: "labels at the limit", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels = labels(MaxLabels) }},
		{name: "too many labels", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels = labels(MaxLabels + 1) },
			want: []want{tooMany("metadata.labels")}},
		{name: "too many template labels", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Metadata.Labels = labels(MaxLabels + 1) },
			want: []want{tooMany("spec.template.metadata.labels")}},
		{name: "too many node selector terms", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).NodeSelector = labels(MaxLabels + 1) },
			want: []want{tooMany(tspec + ".node_selector")}},
		{name: "too many annotations", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Annotations = labels(MaxAnnotations + 1) },
			want: []want{tooMany("metadata.annotations")}},
		{name: "template annotations too large", mutate: func(vm *apiv1.VirtualMachine) {
			vm.Spec.Template.Metadata.Annotations = map[string]string{"a": strings.Repeat("x", 128<<10), "b": strings.Repeat("x", 128<<10)}
		}, want: []want{tooLong("spec.template.metadata.annotations")}},
		{name: "disks at the limit", mutate: func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Disks, tspecOf(vm).Volumes = mkDisks(MaxDevices)
		}},
		{name: "too many disks and volumes", mutate: func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Disks, tspecOf(vm).Volumes = mkDisks(MaxDevices + 1)
		}, want: []want{tooMany(disks), tooMany(vols)}},
		{name: "too many volumes", mutate: func(vm *apiv1.VirtualMachine) {
			_, tspecOf(vm).Volumes = mkDisks(MaxDevices + 1)
		}, want: []want{tooMany(vols)}},
		{name: "grace period of a year", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).TerminationGracePeriodSeconds = ptr(int64(MaxGracePeriodSeconds))
		}},
		// A node counts it in time.Duration: 1e11 s wraps around.
		{name: "grace period past a node's clock", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).TerminationGracePeriodSeconds = ptr(int64(1e11))
		}, want: []want{invalid(tspec + ".termination_grace_period_seconds")}},
		{name: "interfaces at the limit", mutate: func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Interfaces, tspecOf(vm).Networks = nics(MaxDevices)
		}},
		{name: "too many interfaces and networks", mutate: func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Interfaces, tspecOf(vm).Networks = nics(MaxDevices + 1)
		}, want: []want{tooMany(ifaces), tooMany(nets)}},
	}
	runVMCases(t, cases)
}

// A VM over the size limit is refused at its largest part; one made large
// by no single field, at the message that is.
func TestValidateVMSize(t *testing.T) {
	vm := validVM()
	if errs := validateVMSize(vm, proto.Size(vm)); len(errs) != 0 {
		t.Fatalf("a VM at the limit: %v", errs)
	}
	vm.Spec.Template.Spec.Volumes[2].CloudInitNoCloud.UserData = strings.Repeat("x", 4000)
	expectErrors(t, validateVMSize(vm, 2000), tooLong(vols))
	errs := validateVMSize(vm, 2000)
	if !strings.Contains(errs[0].Error(), "more than the 2000 allowed") {
		t.Errorf("message %q", errs[0].Error())
	}
	vm = validVM()
	vm.Metadata.Annotations["big"] = strings.Repeat("x", 4000)
	expectErrors(t, validateVMSize(vm, 2000), tooLong("metadata.annotations"))
	vm = validVM()
	vm.Spec.Template.Spec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "k", Cmdline: strings.Repeat("x", 4000)}}
	expectErrors(t, validateVMSize(vm, 2000), tooLong(domain))
	// Through ValidateVirtualMachine, at MaxObjectBytes: a VM whose
	// fields are each at their limit fits (apiserver's
	// TestLargestVMIsStored stores one).
	expectErrors(t, ValidateVirtualMachine(largestValidVM(), Options{}))
	if n := proto.Size(largestValidVM()); n > MaxObjectBytes || n < MaxObjectBytes*3/4 {
		t.Errorf("the largest valid VM encodes to %d bytes; want it near but under %d", n, MaxObjectBytes)
	}
}

// Fields the schema does not have are dropped, not stored: nothing
// validates them.
func TestDefaultingDropsUnknownFieldsAndTemplateMetadata(t *testing.T) {
	vm := validVM()
	var junk []byte
	junk = protowire.AppendTag(junk, 999, protowire.BytesType)
	junk = protowire.AppendBytes(junk, make([]byte, 1<<20))
	vm.ProtoReflect().SetUnknown(junk)
	vm.Spec.Template.Spec.Domain.ProtoReflect().SetUnknown(junk)
	vm.Spec.Template.Spec.Volumes[0].ProtoReflect().SetUnknown(junk)
	vm.Spec.Template.Metadata.Name = strings.Repeat("n", 1<<20)
	vm.Spec.Template.Metadata.Finalizers = []string{"a", "b"}
	vm.Spec.Template.Metadata.Annotations = map[string]string{"keep": "me"}
	DefaultVirtualMachine(vm)
	if n := proto.Size(vm); n > 4096 {
		t.Fatalf("after defaulting the VM still encodes to %d bytes", n)
	}
	if m := vm.Spec.Template.Metadata; m.Name != "" || m.Finalizers != nil || m.Labels["app"] != "web" || m.Annotations["keep"] != "me" {
		t.Fatalf("template metadata %v: want labels and annotations only", m)
	}
	expectErrors(t, ValidateVirtualMachine(vm, Options{}))
}

// largestValidVM has every field at its limit at once: the most a client
// can get stored.
func largestValidVM() *apiv1.VirtualMachine {
	vm := validVM()
	bigMap := func(prefix string, n int, valueLen int) map[string]string {
		m := map[string]string{}
		for i := range n {
			// A qualified key of the longest form: 253-byte prefix, 63-byte name.
			k := fmt.Sprintf("%s/%s%05d", strings.Repeat("p", 253), strings.Repeat(prefix, 58), i)
			m[k] = strings.Repeat("v", valueLen)
		}
		return m
	}
	annotations := func() map[string]string {
		m := map[string]string{}
		per := MaxAnnotationBytes / 8
		for i := range 8 {
			k := fmt.Sprintf("a%d", i)
			m[k] = strings.Repeat("x", per-len(k))
		}
		return m
	}
	vm.Metadata.Labels = bigMap("l", MaxLabels, 63)
	vm.Metadata.Annotations = annotations()
	vm.Spec.Template.Metadata.Labels = bigMap("t", MaxLabels, 63)
	vm.Spec.Template.Metadata.Annotations = annotations()
	spec := vm.Spec.Template.Spec
	spec.NodeSelector = bigMap("s", MaxLabels, 63)
	longImage := func(i int) string {
		// maxImagePathLen bytes in elements of at most 255.
		var parts []string
		rest := maxImagePathLen
		for rest > maxImageNameElemLen {
			parts = append(parts, strings.Repeat("d", maxImageNameElemLen-1))
			rest -= maxImageNameElemLen
		}
		last := fmt.Sprintf("%05d", i)
		return strings.Join(append(parts, strings.Repeat("f", rest-len(last))+last), "/")
	}
	spec.Volumes = nil
	spec.Domain.Devices.Disks = nil
	for i := range MaxDevices {
		name := fmt.Sprintf("v%02d", i)
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, &apiv1.Disk{Name: name, Serial: strings.Repeat("s", maxDiskSerialLen)})
		v := &apiv1.Volume{Name: name, Image: &apiv1.ImageVolume{Name: longImage(i)}}
		if i == 0 {
			v = &apiv1.Volume{Name: name, CloudInitNoCloud: &apiv1.CloudInitNoCloud{
				UserData: strings.Repeat("u", maxCloudInitData), NetworkData: strings.Repeat("n", maxCloudInitData)}}
		}
		spec.Volumes = append(spec.Volumes, v)
	}
	spec.Domain.Devices.Interfaces = nil
	spec.Networks = nil
	for i := range MaxDevices {
		name := fmt.Sprintf("n%02d", i)
		spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, &apiv1.Interface{Name: name, MacAddress: fmt.Sprintf("02:00:00:00:01:%02x", i)})
		spec.Networks = append(spec.Networks, &apiv1.Network{Name: name, User: &apiv1.UserNetwork{}})
	}
	spec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{
		Kernel: longImage(1000), Initrd: longImage(1001), Cmdline: strings.Repeat("c", maxKernelCmdline)}}
	return vm
}
