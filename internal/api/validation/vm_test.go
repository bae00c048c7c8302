//lint:file-ignore SA1019 these tests write the deprecated running flag: VMs written with it must keep working

package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

type vmCase struct {
	name   string
	mutate func(vm *apiv1.VirtualMachine)
	opts   Options
	want   []want
	// wantDefaulted, when set, is what validation reports after
	// DefaultVirtualMachine (defaulting fills in some of what was missing).
	wantDefaulted []want
	// rawOnly skips the defaulted run (defaulting makes the case moot).
	rawOnly bool
}

// runVMCases validates each case's VM raw, and after defaulting unless
// the case says otherwise.
func runVMCases(t *testing.T, cases []vmCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := validVM()
			tc.mutate(vm)
			expectErrors(t, ValidateVirtualMachine(vm, tc.opts), tc.want...)
			if tc.rawOnly {
				return
			}
			// A fresh copy: proto.Clone would turn nil list elements into
			// empty messages.
			vm = validVM()
			tc.mutate(vm)
			DefaultVirtualMachine(vm)
			wantDefaulted := tc.want
			if tc.wantDefaulted != nil {
				wantDefaulted = tc.wantDefaulted
			}
			expectErrors(t, ValidateVirtualMachine(vm, tc.opts), wantDefaulted...)
		})
	}
}

func TestValidateVirtualMachine(t *testing.T) {
	cases := []vmCase{
		{name: "valid", mutate: func(*apiv1.VirtualMachine) {}},

		// --- metadata
		{name: "name missing", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Name = "" },
			want: []want{required("metadata.name")}},
		{name: "name not a label", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Name = "Web_1" },
			want: []want{invalid("metadata.name")}},
		{name: "name with dot", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Name = "web.example" },
			want: []want{invalid("metadata.name")}},
		{name: "name too long", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Name = strings.Repeat("a", 64) },
			want: []want{invalid("metadata.name")}},
		{name: "name 63 chars", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Name = strings.Repeat("a", 63) }},
		{name: "namespace invalid", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Namespace = "Prod" },
			want: []want{invalid("metadata.namespace")}},
		{name: "namespace empty", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Namespace = "" },
			want: []want{required("metadata.namespace")}, wantDefaulted: []want{}},
		{name: "metadata missing", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata = nil },
			want: []want{required("metadata")}, wantDefaulted: []want{required("metadata.name")}},
		{name: "label key invalid", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels["a b"] = "x" },
			want: []want{invalid("metadata.labels")}},
		{name: "label value invalid", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels["app"] = "-web" },
			want: []want{invalid("metadata.labels[app]")}},
		{name: "label value too long", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Labels["app"] = strings.Repeat("a", 64) },
			want: []want{invalid("metadata.labels[app]")}},
		{name: "annotation key invalid", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Annotations["/x"] = "" },
			want: []want{invalid("metadata.annotations")}},
		{name: "annotation key upper case ok", mutate: func(vm *apiv1.VirtualMachine) { vm.Metadata.Annotations["Example.com/Owner"] = "x" }},
		{name: "annotations too large", mutate: func(vm *apiv1.VirtualMachine) {
			vm.Metadata.Annotations["big"] = strings.Repeat("x", 256*1024)
		}, want: []want{tooLong("metadata.annotations")}},

		// --- run strategy and policies
		{name: "running and run_strategy", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.Running = ptr(true) },
			want: []want{invalid("spec.running")}},
		{name: "neither running nor run_strategy", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "" },
			want: []want{required("spec.run_strategy")}},
		{name: "running only", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = ""; vm.Spec.Running = ptr(true) }},
		{name: "running false only", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = ""; vm.Spec.Running = ptr(false) }},
		{name: "run_strategy RerunOnFailure", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "RerunOnFailure" }},
		{name: "run_strategy Manual", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "Manual" }},
		{name: "run_strategy Halted", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "Halted" }},
		{name: "run_strategy Once", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "Once" }},
		{name: "run_strategy wrong case", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "always" },
			want: []want{notSupported("spec.run_strategy")}},
		{name: "run_strategy WaitAsReceiver", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "WaitAsReceiver" },
			want: []want{notSupported("spec.run_strategy")}},
		{name: "node_failure_policy Wait", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.NodeFailurePolicy = "Wait" }},
		{name: "node_failure_policy unset", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.NodeFailurePolicy = "" }},
		{name: "node_failure_policy unknown", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.NodeFailurePolicy = "Reboot" },
			want: []want{notSupported("spec.node_failure_policy")}},
		{name: "eviction_strategy unknown", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).EvictionStrategy = "Evict" },
			want: []want{notSupported(tspec + ".eviction_strategy")}},
		{name: "eviction_strategy External", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).EvictionStrategy = "External" }},

		// --- structure
		{name: "spec missing", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec = nil },
			want: []want{required("spec")}, rawOnly: true},
		{name: "template missing", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.Template = nil },
			want: []want{required("spec.template")}, rawOnly: true},
		{name: "template spec missing", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Spec = nil },
			want: []want{required(tspec)}, rawOnly: true},
		{name: "domain missing", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain = nil },
			want: []want{required(domain)}, rawOnly: true},
		{name: "template metadata missing", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Metadata = nil }},
		{name: "template label invalid", mutate: func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Metadata.Labels["app"] = "a b" },
			want: []want{invalid("spec.template.metadata.labels[app]")}},
		{name: "template annotation invalid", mutate: func(vm *apiv1.VirtualMachine) {
			vm.Spec.Template.Metadata.Annotations = map[string]string{"a/b/c": ""}
		}, want: []want{invalid("spec.template.metadata.annotations")}},

		// --- memory
		{name: "memory missing", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory = nil },
			want: []want{required(domain + ".memory.guest")}},
		{name: "memory empty", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "" },
			want: []want{required(domain + ".memory.guest")}},
		{name: "memory not a quantity", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "1GB" },
			want: []want{invalid(domain + ".memory.guest")}},
		{name: "memory fraction of a byte", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "16777216.5" },
			want: []want{invalid(domain + ".memory.guest")}},
		{name: "memory too small", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "8Mi" },
			want: []want{invalid(domain + ".memory.guest")}},
		{name: "memory too large", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "1025Gi" },
			want: []want{invalid(domain + ".memory.guest")}},
		{name: "memory negative", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "-1Gi" },
			want: []want{invalid(domain + ".memory.guest")}},
		{name: "memory huge exponent", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "1e-999999999" },
			want: []want{invalid(domain + ".memory.guest")}},
		{name: "memory minimum", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "16Mi" }},
		{name: "memory maximum", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "1Ti" }},
		{name: "memory decimal", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "2G" }},
		{name: "memory fractional Gi", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "1.5Gi" }},

		// --- cpu
		{name: "cpu missing", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu = nil }},
		{name: "cpu zero means default", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu = &apiv1.CPU{} }},
		{name: "cores negative", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu.Cores = -1 },
			want: []want{invalid(domain + ".cpu.cores")}},
		{name: "sockets negative", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu.Sockets = -2 },
			want: []want{invalid(domain + ".cpu.sockets")}},
		{name: "threads negative", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu.Threads = -1 },
			want: []want{invalid(domain + ".cpu.threads")}},
		{name: "512 vcpus", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu = &apiv1.CPU{Cores: 32, Sockets: 8, Threads: 2} }},
		{name: "too many vcpus", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu = &apiv1.CPU{Cores: 16, Sockets: 8, Threads: 8} },
			want: []want{invalid(domain + ".cpu")}},
		{name: "vcpu product does not overflow", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Cpu = &apiv1.CPU{Cores: 1<<31 - 1, Sockets: 1<<31 - 1, Threads: 1<<31 - 1}
		}, want: []want{invalid(domain + ".cpu")}},

		// --- disks
		{name: "disk name duplicate", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[1].Name = "root" },
			want: []want{duplicate(disks + "[1].name"), invalid(vols + "[1].name")}},
		{name: "disk without volume", mutate: func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Disks = append(devicesOf(vm).Disks, &apiv1.Disk{Name: "nope"})
		}, want: []want{notFound(disks + "[3].name")}},
		{name: "volume without disk", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes = append(tspecOf(vm).Volumes, &apiv1.Volume{Name: "extra", Image: &apiv1.ImageVolume{Name: "x.img"}})
		}, want: []want{invalid(vols + "[3].name")}},
		{name: "disk name missing", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0].Name = "" },
			want: []want{required(disks + "[0].name"), invalid(vols + "[0].name")}},
		{name: "disk nil", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0] = nil },
			want:          []want{required(disks + "[0]"), invalid(vols + "[0].name")},
			wantDefaulted: []want{required(disks + "[0].name"), invalid(vols + "[0].name")}},
		{name: "disk and cdrom", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0].Cdrom = &apiv1.CDRomTarget{} },
			want: []want{forbidden(disks + "[0].cdrom")}},
		{name: "no target means disk", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0].Disk = nil }},
		{name: "disk bus unset", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0].Disk.Bus = "" }},
		{name: "disk bus sata", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0].Disk.Bus = "sata" }},
		{name: "disk bus unknown", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0].Disk.Bus = "ide" },
			want: []want{notSupported(disks + "[0].disk.bus")}},
		{name: "cdrom bus scsi", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[2].Cdrom.Bus = "scsi" }},
		{name: "cdrom bus virtio", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[2].Cdrom.Bus = "virtio" },
			want: []want{notSupported(disks + "[2].cdrom.bus")}},
		{name: "boot_order negative", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0].BootOrder = -1 },
			want: []want{invalid(disks + "[0].boot_order")}},
		{name: "boot_order duplicate", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[1].BootOrder = 1 },
			want: []want{duplicate(disks + "[1].boot_order")}},
		{name: "boot_order distinct", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[2].BootOrder = 2 }},
		{name: "serial invalid", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[1].Serial = "a<b" },
			want: []want{invalid(disks + "[1].serial")}},
		{name: "serial too long", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[1].Serial = strings.Repeat("s", 21) },
			want: []want{tooLong(disks + "[1].serial")}},

		// --- volumes
		{name: "volume name duplicate", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes = append(tspecOf(vm).Volumes, &apiv1.Volume{Name: "root", Image: &apiv1.ImageVolume{Name: "x.img"}})
		}, want: []want{duplicate(vols + "[3].name")}},
		{name: "volume name not a label", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[1].Name = "Data_1"
			devicesOf(vm).Disks[1].Name = "Data_1"
		}, want: []want{invalid(vols + "[1].name")}},
		{name: "volume name missing", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Name = "" },
			want: []want{required(vols + "[1].name"), notFound(disks + "[1].name")}},
		{name: "volume nil", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[0] = nil },
			want:          []want{required(vols + "[0]"), notFound(disks + "[0].name")},
			wantDefaulted: []want{required(vols + "[0].name"), required(vols + "[0]"), notFound(disks + "[0].name")}},
		{name: "volume without source", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[0].Image = nil },
			want: []want{required(vols + "[0]")}},
		{name: "volume with two sources", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[0].Persistent = &apiv1.PersistentVolume{Size: "1Gi"}
		}, want: []want{forbidden(vols + "[0].persistent")}},
		{name: "volume with three sources", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[1].Image = &apiv1.ImageVolume{Name: "x.img"}
			tspecOf(vm).Volumes[1].CloudInitNoCloud = &apiv1.CloudInitNoCloud{}
		}, want: []want{forbidden(vols + "[1].persistent"), forbidden(vols + "[1].cloud_init_no_cloud"),
			forbidden(vols + "[2].cloud_init_no_cloud")}},
		{name: "image name missing", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[0].Image.Name = "" },
			want: []want{required(vols + "[0].image.name")}},
		{name: "image name escapes", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[0].Image.Name = "../../etc/shadow" },
			want: []want{invalid(vols + "[0].image.name")}},
		{name: "image name absolute without image dir", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[0].Image.Name = testImageDir + "/debian.qcow2"
		}, want: []want{invalid(vols + "[0].image.name")}},
		{name: "image name absolute inside image dir", opts: Options{ImageDir: testImageDir}, mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[0].Image.Name = testImageDir + "/debian.qcow2"
		}},
		{name: "image name absolute outside image dir", opts: Options{ImageDir: testImageDir}, mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[0].Image.Name = "/etc/shadow"
		}, want: []want{invalid(vols + "[0].image.name")}},
		{name: "image name in subdirectory", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[0].Image.Name = "debian/12.qcow2" }},
		{name: "persistent size missing", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Persistent.Size = "" },
			want: []want{required(vols + "[1].persistent.size")}},
		{name: "persistent size zero", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Persistent.Size = "0" },
			want: []want{invalid(vols + "[1].persistent.size")}},
		{name: "persistent size negative", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Persistent.Size = "-10Gi" },
			want: []want{invalid(vols + "[1].persistent.size")}},
		{name: "persistent size not a quantity", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Persistent.Size = "10 GiB" },
			want: []want{invalid(vols + "[1].persistent.size")}},
		{name: "persistent size fraction of a byte", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Persistent.Size = "1500m" },
			want: []want{invalid(vols + "[1].persistent.size")}},
		{name: "persistent size too large", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Persistent.Size = "2Ei" },
			want: []want{invalid(vols + "[1].persistent.size")}},
		{name: "persistent image", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Persistent.Image = "base/ubuntu.img" }},
		{name: "persistent image escapes", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[1].Persistent.Image = "a/../../b" },
			want: []want{invalid(vols + "[1].persistent.image")}},
		{name: "user_data too long", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[2].CloudInitNoCloud.UserData = strings.Repeat("x", 64*1024+1)
		}, want: []want{tooLong(vols + "[2].cloud_init_no_cloud.user_data")}},
		{name: "user_data at limit", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[2].CloudInitNoCloud.UserData = strings.Repeat("x", 64*1024)
		}},
		{name: "network_data too long", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[2].CloudInitNoCloud.NetworkData = strings.Repeat("x", 64*1024+1)
		}, want: []want{tooLong(vols + "[2].cloud_init_no_cloud.network_data")}},
		{name: "two cloud-init volumes", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes = append(tspecOf(vm).Volumes, &apiv1.Volume{Name: "ci2", CloudInitNoCloud: &apiv1.CloudInitNoCloud{}})
			devicesOf(vm).Disks = append(devicesOf(vm).Disks, &apiv1.Disk{Name: "ci2"})
		}, want: []want{forbidden(vols + "[3].cloud_init_no_cloud")}},

		// --- interfaces and networks
		{name: "interface name duplicate", mutate: func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Interfaces = append(devicesOf(vm).Interfaces, &apiv1.Interface{Name: "default"})
		}, want: []want{duplicate(ifaces + "[1].name")}},
		{name: "interface without network", mutate: func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Interfaces = append(devicesOf(vm).Interfaces, &apiv1.Interface{Name: "other"})
		}, want: []want{notFound(ifaces + "[1].name")}},
		{name: "interface name missing", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].Name = "" },
			want: []want{required(ifaces + "[0].name")}},
		{name: "interface nil", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0] = nil },
			want: []want{required(ifaces + "[0]")}, wantDefaulted: []want{required(ifaces + "[0].name")}},
		{name: "interface model e1000", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].Model = "e1000" }},
		{name: "interface model unset", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].Model = "" }},
		{name: "interface model unknown", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].Model = "ne2k_pci" },
			want: []want{notSupported(ifaces + "[0].model")}},
		{name: "mac unset", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].MacAddress = "" }},
		{name: "mac with dashes", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].MacAddress = "02-00-00-00-00-0A" }},
		{name: "mac garbage", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].MacAddress = "02:00:00:00:00" },
			want: []want{invalid(ifaces + "[0].mac_address")}},
		{name: "mac EUI-64", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].MacAddress = "02:00:00:00:00:00:00:01" },
			want: []want{invalid(ifaces + "[0].mac_address")}},
		{name: "mac multicast", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].MacAddress = "01:00:5e:00:00:01" },
			want: []want{invalid(ifaces + "[0].mac_address")}},
		{name: "mac broadcast", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].MacAddress = "ff:ff:ff:ff:ff:ff" },
			want: []want{invalid(ifaces + "[0].mac_address")}},
		{name: "mac zero", mutate: func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].MacAddress = "00:00:00:00:00:00" },
			want: []want{invalid(ifaces + "[0].mac_address")}},
		{name: "mac duplicate", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks = append(tspecOf(vm).Networks, &apiv1.Network{Name: "second", User: &apiv1.UserNetwork{}})
			devicesOf(vm).Interfaces = append(devicesOf(vm).Interfaces, &apiv1.Interface{Name: "second", MacAddress: "02:00:00:00:00:01"})
		}, want: []want{duplicate(ifaces + "[1].mac_address")}},
		{name: "network name duplicate", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks = append(tspecOf(vm).Networks, &apiv1.Network{Name: "default", User: &apiv1.UserNetwork{}})
		}, want: []want{duplicate(nets + "[1].name")}},
		{name: "network name not a label", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0].Name = "Pod_Net"
			devicesOf(vm).Interfaces[0].Name = "Pod_Net"
		}, want: []want{invalid(nets + "[0].name")}},
		{name: "network without kind", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Networks[0].User = nil },
			want: []want{required(nets + "[0]")}},
		{name: "network with two kinds", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0].Bridge = &apiv1.BridgeNetwork{Bridge: "br0"}
		}, want: []want{forbidden(nets + "[0].bridge")}},
		{name: "bridge network", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0] = &apiv1.Network{Name: "default", Bridge: &apiv1.BridgeNetwork{Bridge: "br0", Vlan: 42}}
		}},
		{name: "bridge network bad", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0] = &apiv1.Network{Name: "default", Bridge: &apiv1.BridgeNetwork{Bridge: "../br0", Vlan: 4095}}
		}, want: []want{invalid(nets + "[0].bridge.bridge"), invalid(nets + "[0].bridge.vlan")}},
		{name: "bridge name too long", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0] = &apiv1.Network{Name: "default", Bridge: &apiv1.BridgeNetwork{Bridge: "a-very-long-bridge"}}
		}, want: []want{tooLong(nets + "[0].bridge.bridge")}},
		{name: "libvirt network", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0] = &apiv1.Network{Name: "default", Network: &apiv1.LibvirtNetwork{Name: "isolated"}}
		}},
		{name: "libvirt network unnamed", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0] = &apiv1.Network{Name: "default", Network: &apiv1.LibvirtNetwork{}}
		}, want: []want{required(nets + "[0].network.name")}},
		{name: "port forwards", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0].User.PortForwards = []*apiv1.PortForward{
				{HostPort: 18080, GuestPort: 80},
				{HostPort: 18080, GuestPort: 80, Protocol: "udp"},
				{HostPort: 18080, GuestPort: 80, HostAddress: "127.0.0.2"},
			}
		}},
		{name: "port forwards bad", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks[0].User.PortForwards = []*apiv1.PortForward{
				{HostPort: 0, GuestPort: 70000},
				{HostPort: 22, GuestPort: 22, Protocol: "sctp"},
				{HostPort: 23, GuestPort: 22, HostAddress: "localhost"},
				{HostPort: 8080, GuestPort: 80},
				{HostPort: 8080, GuestPort: 81, HostAddress: "127.0.0.1"},
				{HostPort: 8081, GuestPort: 80, HostAddress: "::1"},
			}
		}, want: []want{
			invalid(nets + "[0].user.port_forwards[0].host_port"), invalid(nets + "[0].user.port_forwards[0].guest_port"),
			notSupported(nets + "[0].user.port_forwards[1].protocol"), invalid(nets + "[0].user.port_forwards[2].host_address"),
			duplicate(nets + "[0].user.port_forwards[4].host_port"), invalid(nets + "[0].user.port_forwards[5].host_address"),
		}},
		{name: "port forwards overlapping", mutate: func(vm *apiv1.VirtualMachine) {
			// 0.0.0.0 binds 127.0.0.1 too: QEMU could not listen on both.
			tspecOf(vm).Networks[0].User.PortForwards = []*apiv1.PortForward{
				{HostPort: 18080, GuestPort: 80, HostAddress: "0.0.0.0"},
				{HostPort: 18080, GuestPort: 81},
				{HostPort: 18080, GuestPort: 82, Protocol: "udp"},
			}
		}, want: []want{duplicate(nets + "[0].user.port_forwards[1].host_port")}},
		{name: "too many port forwards", mutate: func(vm *apiv1.VirtualMachine) {
			var fs []*apiv1.PortForward
			for i := range MaxPortForwards + 1 {
				fs = append(fs, &apiv1.PortForward{HostPort: int32(20000 + i), GuestPort: 80})
			}
			tspecOf(vm).Networks[0].User.PortForwards = fs
		}, want: []want{tooMany(nets + "[0].user.port_forwards")}},
		{name: "network nil", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Networks[0] = nil },
			want:          []want{required(nets + "[0]"), notFound(ifaces + "[0].name")},
			wantDefaulted: []want{required(nets + "[0].name"), required(nets + "[0]"), notFound(ifaces + "[0].name")}},
		{name: "network without interface", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks = append(tspecOf(vm).Networks, &apiv1.Network{Name: "spare", User: &apiv1.UserNetwork{}})
		}},
		{name: "no networking at all", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Networks = nil
			devicesOf(vm).Interfaces = nil
		}},

		// --- kernel boot
		{name: "kernel boot", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{
				Kernel: "kernels/vmlinuz", Initrd: "kernels/initrd.img", Cmdline: "console=ttyS0 root=/dev/vda1"}}
		}},
		{name: "empty firmware", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Firmware = &apiv1.Firmware{} }},
		{name: "kernel missing", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Initrd: "initrd.img"}}
		}, want: []want{required(kboot + ".kernel")}},
		{name: "kernel escapes", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "../../boot/vmlinuz"}}
		}, want: []want{invalid(kboot + ".kernel")}},
		{name: "initrd absolute", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "vmlinuz", Initrd: "/boot/initrd.img"}}
		}, want: []want{invalid(kboot + ".initrd")}},
		{name: "cmdline too long", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "vmlinuz", Cmdline: strings.Repeat("x", 4097)}}
		}, want: []want{tooLong(kboot + ".cmdline")}},
		{name: "cmdline with NUL", mutate: func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "vmlinuz", Cmdline: "a\x00b"}}
		}, want: []want{invalid(kboot + ".cmdline")}},

		// --- scheduling and shutdown
		{name: "node_selector key invalid", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).NodeSelector["bad key"] = "x" },
			want: []want{invalid(tspec + ".node_selector")}},
		{name: "node_selector value invalid", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).NodeSelector["kubernetes.io/arch"] = "x86 64" },
			want: []want{invalid(tspec + ".node_selector[kubernetes.io/arch]")}},
		{name: "grace period negative", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).TerminationGracePeriodSeconds = ptr(int64(-1)) },
			want: []want{invalid(tspec + ".termination_grace_period_seconds")}},
		{name: "grace period zero", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).TerminationGracePeriodSeconds = ptr(int64(0)) }},
		{name: "grace period unset", mutate: func(vm *apiv1.VirtualMachine) { tspecOf(vm).TerminationGracePeriodSeconds = nil }},
	}
	runVMCases(t, cases)
}

// Error texts users see; the paths and types are covered above.
func TestValidateVirtualMachineMessages(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(vm *apiv1.VirtualMachine)
		want   string
	}{
		{"mutually exclusive", func(vm *apiv1.VirtualMachine) { vm.Spec.Running = ptr(true) },
			`spec.running: Invalid value: true: running and run_strategy are mutually exclusive`},
		{"run strategy required", func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "" },
			`spec.run_strategy: Required value: one of run_strategy or running is required`},
		{"run strategy unsupported", func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "always" },
			`spec.run_strategy: Unsupported value: "always": supported values: "Always", "RerunOnFailure", "Manual", "Halted", "Once"`},
		{"WaitAsReceiver", func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "WaitAsReceiver" },
			`spec.run_strategy: Unsupported value: "WaitAsReceiver": WaitAsReceiver (KubeVirt's cross-cluster migration target) is not supported by virtplane; supported values: "Always", "RerunOnFailure", "Manual", "Halted", "Once"`},
		{"memory not a quantity", func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "1GB" },
			`spec.template.spec.domain.memory.guest: Invalid value: "1GB": must be a quantity such as 512Mi or 1Gi`},
		{"memory too small", func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "8Mi" },
			`spec.template.spec.domain.memory.guest: Invalid value: "8Mi": must be at least 16Mi`},
		{"memory too large", func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "2Ti" },
			`spec.template.spec.domain.memory.guest: Invalid value: "2Ti": must be at most 1Ti`},
		{"memory fractional", func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Memory.Guest = "16777216.5" },
			`spec.template.spec.domain.memory.guest: Invalid value: "16777216.5": must be a whole number of bytes`},
		{"cores negative", func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu.Cores = -1 },
			`spec.template.spec.domain.cpu.cores: Invalid value: -1: must be at least 1`},
		{"too many vcpus", func(vm *apiv1.VirtualMachine) { tspecOf(vm).Domain.Cpu = &apiv1.CPU{Cores: 64, Sockets: 4, Threads: 4} },
			`spec.template.spec.domain.cpu: Invalid value: 1024: cores × sockets × threads must be at most 512`},
		{"disk duplicate", func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Disks = append(devicesOf(vm).Disks, &apiv1.Disk{Name: "root"})
		}, `spec.template.spec.domain.devices.disks[3].name: Duplicate value: "root"`},
		{"disk without volume", func(vm *apiv1.VirtualMachine) {
			devicesOf(vm).Disks = append(devicesOf(vm).Disks, &apiv1.Disk{Name: "nope"})
		}, `spec.template.spec.domain.devices.disks[3].name: Not found: "nope": no volume with this name; a disk names the volume that backs it`},
		{"volume without disk", func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes = append(tspecOf(vm).Volumes, &apiv1.Volume{Name: "extra", Image: &apiv1.ImageVolume{Name: "x.img"}})
		}, `spec.template.spec.volumes[3].name: Invalid value: "extra": volume is not used by any disk; add a disk with the same name`},
		{"disk bus", func(vm *apiv1.VirtualMachine) { devicesOf(vm).Disks[0].Disk.Bus = "ide" },
			`spec.template.spec.domain.devices.disks[0].disk.bus: Unsupported value: "ide": supported values: "virtio", "sata", "scsi"`},
		{"image escapes", func(vm *apiv1.VirtualMachine) { tspecOf(vm).Volumes[0].Image.Name = "../x" },
			`spec.template.spec.volumes[0].image.name: Invalid value: "../x": must not contain ".." elements`},
		{"mac multicast", func(vm *apiv1.VirtualMachine) { devicesOf(vm).Interfaces[0].MacAddress = "01:00:5e:00:00:01" },
			`spec.template.spec.domain.devices.interfaces[0].mac_address: Invalid value: "01:00:5e:00:00:01": must be a unicast MAC address (least significant bit of the first octet clear)`},
		{"volume two sources", func(vm *apiv1.VirtualMachine) {
			tspecOf(vm).Volumes[0].Persistent = &apiv1.PersistentVolume{Size: "1Gi"}
		},
			`spec.template.spec.volumes[0].persistent: Forbidden: may not be set together with image; a volume has exactly one source`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := validVM()
			tc.mutate(vm)
			errs := ValidateVirtualMachine(vm, Options{})
			if len(errs) != 1 || errs[0].Error() != tc.want {
				t.Errorf("got %v\nwant [%s]", errs, tc.want)
			}
		})
	}
}

func TestValidateVirtualMachineNil(t *testing.T) {
	expectErrors(t, ValidateVirtualMachine(nil, Options{}), required("metadata"), required("spec"))
	expectErrors(t, ValidateVirtualMachine(&apiv1.VirtualMachine{}, Options{}), required("metadata"), required("spec"))
	expectErrors(t, ValidateVirtualMachineUpdate(nil, nil, Options{}), required("metadata"), required("spec"))

	// After defaulting an empty VM only what the user must supply is missing.
	vm := &apiv1.VirtualMachine{}
	DefaultVirtualMachine(vm)
	expectErrors(t, ValidateVirtualMachine(vm, Options{}),
		required("metadata.name"), required("spec.run_strategy"), required(domain+".memory.guest"))
}

func TestValidateVirtualMachineUpdate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(vm *apiv1.VirtualMachine)
		want   []want
	}{
		{"unchanged", func(*apiv1.VirtualMachine) {}, nil},
		{"spec and labels may change", func(vm *apiv1.VirtualMachine) {
			vm.Spec.RunStrategy = "Halted"
			vm.Metadata.Labels["tier"] = "front"
			tspecOf(vm).Domain.Memory.Guest = "2Gi"
		}, nil},
		{"name", func(vm *apiv1.VirtualMachine) { vm.Metadata.Name = "web2" }, []want{invalid("metadata.name")}},
		{"namespace", func(vm *apiv1.VirtualMachine) { vm.Metadata.Namespace = "dev" }, []want{invalid("metadata.namespace")}},
		{"uid", func(vm *apiv1.VirtualMachine) { vm.Metadata.Uid = "other" }, []want{invalid("metadata.uid")}},
		{"uid cleared", func(vm *apiv1.VirtualMachine) { vm.Metadata.Uid = "" }, []want{required("metadata.uid")}},
		{"uid another UUID", func(vm *apiv1.VirtualMachine) { vm.Metadata.Uid = "6f1c2a3e-0000-4000-8000-000000000002" }, []want{invalid("metadata.uid")}},
		{"uid a path", func(vm *apiv1.VirtualMachine) { vm.Metadata.Uid = "../../003/victim" }, []want{invalid("metadata.uid")}},
		{"new object also validated", func(vm *apiv1.VirtualMachine) { vm.Spec.RunStrategy = "Sometimes" },
			[]want{notSupported("spec.run_strategy")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old, vm := validVM(), validVM()
			tc.mutate(vm)
			expectErrors(t, ValidateVirtualMachineUpdate(vm, old, Options{}), tc.want...)
		})
	}
	t.Run("message", func(t *testing.T) {
		vm := validVM()
		vm.Metadata.Name = "web2"
		errs := ValidateVirtualMachineUpdate(vm, validVM(), Options{})
		if want := `metadata.name: Invalid value: "web2": field is immutable`; len(errs) != 1 || errs[0].Error() != want {
			t.Errorf("got %v, want %s", errs, want)
		}
	})
	t.Run("nil old", func(t *testing.T) {
		expectErrors(t, ValidateVirtualMachineUpdate(validVM(), nil, Options{}))
	})
}

func TestValidateVirtualMachineInstanceSpec(t *testing.T) {
	p := field.NewPath("spec")
	expectErrors(t, ValidateVirtualMachineInstanceSpec(nil, p, Options{}), required("spec"))
	expectErrors(t, ValidateVirtualMachineInstanceSpec(&apiv1.VirtualMachineInstanceSpec{}, p, Options{}), required("spec.domain"))
	spec := tspecOf(validVM())
	expectErrors(t, ValidateVirtualMachineInstanceSpec(spec, p, Options{}))
	spec.Domain.Memory.Guest = "1"
	expectErrors(t, ValidateVirtualMachineInstanceSpec(spec, p, Options{}), invalid("spec.domain.memory.guest"))

	vmi := &apiv1.VirtualMachineInstance{Spec: tspecOf(validVM())}
	vmi.Spec.Domain.Devices.Disks[0].Disk = nil
	DefaultVirtualMachineInstance(vmi)
	expectErrors(t, ValidateVirtualMachineInstanceSpec(vmi.Spec, p, Options{}))
	expectErrors(t, ValidateObjectMeta(vmi.Metadata, true, field.NewPath("metadata")), required("metadata.name"))
}
