package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// fullModel sets every attribute a configuration can set, with values
// that differ from the defaults where possible.
func fullModel(t *testing.T) vmModel {
	return vmModel{
		Name:      types.StringValue("web"),
		Namespace: types.StringValue("prod"),
		vmSpecModel: vmSpecModel{
			Labels:            mustMap(t, map[string]string{"app": "web"}),
			Annotations:       mustMap(t, map[string]string{"example.com/a": "b"}),
			RunStrategy:       types.StringValue("RerunOnFailure"),
			NodeFailurePolicy: types.StringValue("RestartElsewhere"),
			instanceSpecModel: fullInstanceSpec(t),
		},
	}
}

// fullInstanceSpec sets every attribute of an instance spec, with values
// that differ from the defaults where possible.
func fullInstanceSpec(t *testing.T) instanceSpecModel {
	return instanceSpecModel{
		CPU:    &cpuModel{Cores: types.Int64Value(2), Sockets: types.Int64Value(1), Threads: types.Int64Value(2)},
		Memory: quantityOf("1024Mi"),
		Disks: []diskModel{
			{Name: types.StringValue("root"), Bus: types.StringValue("virtio"), BootOrder: types.Int64Value(1), Image: types.StringNull(),
				Persistent: &persistentModel{Size: quantityOf("10Gi"), Image: types.StringValue("debian.qcow2"), StorageClass: types.StringValue("ceph")}},
			{Name: types.StringValue("scratch"), Bus: types.StringValue("scsi"), BootOrder: types.Int64Null(), Image: types.StringValue("blank.qcow2")},
			{Name: types.StringValue("seed"), Bus: types.StringValue("sata"), BootOrder: types.Int64Null(), Image: types.StringNull(),
				CloudInit: &cloudInitModel{UserData: types.StringValue("#cloud-config\n"), NetworkData: types.StringValue("version: 2\n")}},
		},
		Boot:       &bootModel{Kernel: types.StringValue("vmlinuz"), Initrd: types.StringValue("initrd.img"), Cmdline: types.StringValue("console=ttyS0")},
		Bootloader: &bootloaderModel{BIOS: &biosModel{}},
		Interfaces: []interfaceModel{
			{Name: types.StringValue("default"), Model: types.StringValue("e1000"), MACAddress: types.StringValue("02:00:00:00:00:01"),
				PortForwards: []portForwardModel{
					{HostPort: types.Int64Value(2222), GuestPort: types.Int64Value(22), Protocol: types.StringValue("tcp"), HostAddress: types.StringValue("0.0.0.0")},
					{HostPort: types.Int64Value(5353), GuestPort: types.Int64Value(53), Protocol: types.StringValue("udp"), HostAddress: types.StringValue("127.0.0.1")},
				}},
			{Name: types.StringValue("lan"), Model: types.StringValue("virtio"), MACAddress: types.StringValue("02:00:00:00:00:02"),
				Bridge: &bridgeModel{Name: types.StringValue("br0"), VLAN: types.Int64Value(42)}, PortForwards: []portForwardModel{}},
			{Name: types.StringValue("nat"), Model: types.StringValue("virtio"), MACAddress: types.StringValue("02:00:00:00:00:03"),
				Network: &libvirtNetworkModel{Name: types.StringValue("default")}, PortForwards: []portForwardModel{}},
		},
		NodeSelector:           mustMap(t, map[string]string{"zone": "a"}),
		EvictionStrategy:       types.StringValue("LiveMigrate"),
		TerminationGracePeriod: types.Int64Value(5),
	}
}

// stored runs what the agent does on create: defaulting, then validation.
func stored(t *testing.T, vm *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	t.Helper()
	vm = proto.Clone(vm).(*apiv1.VirtualMachine)
	validation.DefaultVirtualMachine(vm)
	if errs := validation.ValidateVirtualMachine(vm, validation.Options{}); len(errs) > 0 {
		t.Fatalf("the agent would reject the VM: %v", errs.ToAggregate())
	}
	vm.Metadata.Uid = "uid-1"
	return vm
}

// Whatever a configuration sets comes back unchanged after the agent's
// defaulting: the round trip that keeps plans empty and imports complete.
func TestVMModelRoundTrip(t *testing.T) {
	ctx := context.Background()
	in := fullModel(t)
	vm, d := vmFromModel(ctx, &in)
	if d.HasError() {
		t.Fatal(d)
	}
	out, d := vmToModel(ctx, stored(t, vm), nil, readOptions{})
	if d.HasError() {
		t.Fatal(d)
	}
	if got := out.ID.ValueString(); got != "prod/web" {
		t.Errorf("id = %q", got)
	}
	if !out.Memory.Equal(quantityOf("1Gi")) {
		t.Errorf("memory read back as %s, want the canonical 1Gi", out.Memory)
	}
	if eq, _ := in.Memory.StringSemanticEquals(ctx, out.Memory); !eq {
		t.Error("1024Mi and 1Gi must be semantically equal")
	}
	in.Memory = out.Memory
	out.ID, out.UID, out.Status, out.RestartRequired = in.ID, in.UID, in.Status, in.RestartRequired
	if diff := compareModels(in, out); diff != "" {
		t.Errorf("round trip changed the model:\n%s", diff)
	}
}

// compareModels renders differences of two models; "" when equal.
func compareModels(a, b vmModel) string {
	var diffs []string
	eq := func(name string, x, y interface{ String() string }) {
		if x.String() != y.String() {
			diffs = append(diffs, name+": "+x.String()+" != "+y.String())
		}
	}
	eq("name", a.Name, b.Name)
	eq("namespace", a.Namespace, b.Namespace)
	eq("labels", a.Labels, b.Labels)
	eq("annotations", a.Annotations, b.Annotations)
	eq("run_strategy", a.RunStrategy, b.RunStrategy)
	eq("memory", a.Memory, b.Memory)
	eq("node_selector", a.NodeSelector, b.NodeSelector)
	eq("node_failure_policy", a.NodeFailurePolicy, b.NodeFailurePolicy)
	eq("eviction_strategy", a.EvictionStrategy, b.EvictionStrategy)
	eq("termination_grace_period", a.TerminationGracePeriod, b.TerminationGracePeriod)
	if (a.CPU == nil) != (b.CPU == nil) || (a.CPU != nil && *a.CPU != *b.CPU) {
		diffs = append(diffs, "cpu differs")
	}
	if (a.Boot == nil) != (b.Boot == nil) || (a.Boot != nil && *a.Boot != *b.Boot) {
		diffs = append(diffs, "boot differs")
	}
	if fa, fb := fmtBootloader(a.Bootloader), fmtBootloader(b.Bootloader); fa != fb {
		diffs = append(diffs, "bootloader: "+fa+" != "+fb)
	}
	if len(a.Disks) != len(b.Disks) {
		diffs = append(diffs, "disk count differs")
	} else {
		for i := range a.Disks {
			x, y := a.Disks[i], b.Disks[i]
			eq("disk name", x.Name, y.Name)
			eq("disk bus", x.Bus, y.Bus)
			eq("disk boot_order", x.BootOrder, y.BootOrder)
			eq("disk image", x.Image, y.Image)
			if (x.Persistent == nil) != (y.Persistent == nil) || (x.Persistent != nil && (!x.Persistent.Size.Equal(y.Persistent.Size) || !x.Persistent.Image.Equal(y.Persistent.Image))) {
				diffs = append(diffs, "disk persistent differs")
			}
			if (x.CloudInit == nil) != (y.CloudInit == nil) || (x.CloudInit != nil && *x.CloudInit != *y.CloudInit) {
				diffs = append(diffs, "disk cloud_init differs")
			}
		}
	}
	if len(a.Interfaces) != len(b.Interfaces) {
		diffs = append(diffs, "interface count differs")
	} else {
		for i := range a.Interfaces {
			if x, y := fmtInterface(a.Interfaces[i]), fmtInterface(b.Interfaces[i]); x != y {
				diffs = append(diffs, "interface: "+x+" != "+y)
			}
		}
	}
	return strings.Join(diffs, "\n")
}

// A configuration that leaves everything to defaults reads back as the
// schema's defaults, with absent blocks and maps still absent (no cpu block
// for 1/1/1), so there is no perpetual diff.
func TestVMModelDefaultsReadBackAsUnset(t *testing.T) {
	ctx := context.Background()
	in := vmModel{
		Name: types.StringValue("min"), Namespace: types.StringValue("default"),
		vmSpecModel: vmSpecModel{
			Labels: types.MapNull(types.StringType), Annotations: types.MapNull(types.StringType),
			RunStrategy:       types.StringValue("Always"),
			instanceSpecModel: minimalInstanceSpec(),
		},
	}
	vm, d := vmFromModel(ctx, &in)
	if d.HasError() {
		t.Fatal(d)
	}
	out, d := vmToModel(ctx, stored(t, vm), nil, readOptions{prior: &in})
	if d.HasError() {
		t.Fatal(d)
	}
	checks := map[string][2]string{
		"cpu":                      {fmtPtr(out.CPU), "<nil>"},
		"boot":                     {fmtPtr(out.Boot), "<nil>"},
		"bootloader":               {fmtBootloader(out.Bootloader), "<nil>"},
		"labels":                   {out.Labels.String(), "<null>"},
		"annotations":              {out.Annotations.String(), "<null>"},
		"node_selector":            {out.NodeSelector.String(), "<null>"},
		"node_failure_policy":      {out.NodeFailurePolicy.ValueString(), "Wait"},
		"eviction_strategy":        {out.EvictionStrategy.String(), "<null>"},
		"termination_grace_period": {out.TerminationGracePeriod.String(), "30"},
		"disk[0].bus":              {out.Disks[0].Bus.ValueString(), "virtio"},
		"disk[1].bus":              {out.Disks[1].Bus.ValueString(), "sata"},
		"disk[1].network_data":     {out.Disks[1].CloudInit.NetworkData.String(), "<null>"},
		"interface[0].model":       {out.Interfaces[0].Model.ValueString(), "virtio"},
		"interface[0].mac_address": {out.Interfaces[0].MACAddress.String(), "<null>"},
	}
	for name, c := range checks {
		if c[0] != c[1] {
			t.Errorf("%s read back as %s, want %s", name, c[0], c[1])
		}
	}

	// The data source shows everything, defaults included.
	full, _ := vmToModel(ctx, stored(t, vm), nil, readOptions{full: true})
	if full.CPU == nil || full.Labels.IsNull() || full.NodeSelector.IsNull() {
		t.Errorf("data source model hides defaults: cpu %v labels %s", full.CPU, full.Labels)
	}
}

// minimalInstanceSpec leaves everything it can to defaults.
func minimalInstanceSpec() instanceSpecModel {
	return instanceSpecModel{
		NodeSelector: types.MapNull(types.StringType),
		Memory:       quantityOf("256Mi"),
		Disks: []diskModel{{Name: types.StringValue("root"), Bus: types.StringNull(), BootOrder: types.Int64Null(), Image: types.StringValue("a.qcow2")},
			{Name: types.StringValue("seed"), Bus: types.StringNull(), BootOrder: types.Int64Null(), Image: types.StringNull(),
				CloudInit: &cloudInitModel{UserData: types.StringValue("x"), NetworkData: types.StringNull()}}},
		Interfaces: []interfaceModel{{Name: types.StringValue("default"), Model: types.StringNull(), MACAddress: types.StringNull()}},
	}
}

func fmtPtr[T any](p *T) string {
	if p == nil {
		return "<nil>"
	}
	return "set"
}

// A VM written with the deprecated running flag maps to the run strategy
// KubeVirt gives it, and an update moves it to run_strategy.
func TestRunningFlagMapsToRunStrategy(t *testing.T) {
	yes := true
	//lint:ignore SA1019 a VM written with the deprecated flag is what is tested
	cur := &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Name: "x"}, Spec: &apiv1.VirtualMachineSpec{Running: &yes}}
	next := mergeVM(cur, &apiv1.VirtualMachine{Spec: &apiv1.VirtualMachineSpec{RunStrategy: "Always",
		Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{}}}})
	if _, set := next.Spec.RunningFlag(); set || next.Spec.RunStrategy != "Always" {
		t.Errorf("merge kept the running flag (%v), run_strategy=%q", set, next.Spec.RunStrategy)
	}
}

// The eviction strategy is Terraform's: an update sets the configured one,
// and a configuration without one clears a stored one (the cluster's
// default then applies), whoever set it.
func TestMergeVMManagesEvictionStrategy(t *testing.T) {
	ctx := context.Background()
	m := fullModel(t)
	want, _ := vmFromModel(ctx, &m)
	cur := stored(t, want)
	for _, c := range []struct {
		config types.String
		want   string
	}{
		{types.StringValue("External"), "External"},
		{types.StringNull(), ""},
	} {
		m.EvictionStrategy = c.config
		want, _ := vmFromModel(ctx, &m)
		next := mergeVM(cur, want)
		if got := next.Spec.Template.Spec.EvictionStrategy; got != c.want {
			t.Errorf("eviction_strategy %s: merged %q over %q, want %q", c.config, got, cur.Spec.Template.Spec.EvictionStrategy, c.want)
		}
		// And it reads back as configured: "" is null.
		out, _ := vmToModel(ctx, stored(t, next), nil, readOptions{})
		if !out.EvictionStrategy.Equal(c.config) {
			t.Errorf("eviction_strategy %s read back as %s", c.config, out.EvictionStrategy)
		}
	}
}

// An update keeps what the schema does not model, so applying never
// clobbers settings made with other tools.
func TestMergeVMKeepsUnmanagedFields(t *testing.T) {
	ctx := context.Background()
	m := fullModel(t)
	want, _ := vmFromModel(ctx, &m)
	cur := stored(t, want)
	cur.Metadata.Annotations = map[string]string{"tool": "x"}
	cur.Spec.Template.Metadata.Labels = map[string]string{"tmpl": "y"}
	cur.Spec.Template.Spec.Domain.Devices.Disks[0].Serial = "SER1"
	cur.Spec.Template.Spec.Domain.Devices.Disks[1].Disk.ReadOnly = true
	cur.Spec.Template.Spec.Domain.Devices.Disks = append(cur.Spec.Template.Spec.Domain.Devices.Disks,
		&apiv1.Disk{Name: "iso", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}})
	cur.Spec.Template.Spec.Volumes = append(cur.Spec.Template.Spec.Volumes,
		&apiv1.Volume{Name: "iso", Image: &apiv1.ImageVolume{Name: "install.iso"}})
	// The imported CD-ROM as the schema shows it: an image disk on sata.
	read, _ := vmToModel(ctx, cur, nil, readOptions{})
	m.Disks = append(m.Disks, read.Disks[3])

	m.Memory = quantityOf("2Gi")
	want, _ = vmFromModel(ctx, &m)
	next := mergeVM(cur, want)
	switch {
	case next.Metadata.Annotations["tool"] != "x":
		t.Error("VM annotations lost")
	case next.Spec.Template.Metadata.Labels["tmpl"] != "y":
		t.Error("template labels lost")
	case next.Spec.Template.Spec.Domain.Devices.Disks[0].Serial != "SER1":
		t.Error("disk serial lost")
	case !next.Spec.Template.Spec.Domain.Devices.Disks[1].Disk.ReadOnly:
		t.Error("read-only flag lost")
	case next.Spec.Template.Spec.Domain.Memory.Guest != "2Gi":
		t.Error("the planned memory was not applied")
	case cur.Spec.Template.Spec.Domain.Memory.Guest != "1Gi":
		t.Error("mergeVM modified its input")
	case next.Spec.Template.Spec.Domain.Devices.Disks[3].Cdrom.GetBus() != "sata":
		t.Errorf("CD-ROM turned into %v", next.Spec.Template.Spec.Domain.Devices.Disks[3])
	}
}

// status.interfaces shows what the node reports of a running instance,
// with unset values null and the address list never null; a stopped or
// finished VM shows none, not its last instance's addresses.
func TestInterfaceStatusList(t *testing.T) {
	vmi := vmiWith("i1", apiv1.PhaseRunning, true)
	vmi.Status.Interfaces = []*apiv1.InterfaceStatus{
		{Name: "default", MacAddress: "02:00:00:00:00:01", IpAddress: "10.0.2.15", IpAddresses: []string{"10.0.2.15", "fec0::5054:ff:fe12:3456"},
			Source: apiv1.InterfaceSourceAgent, InterfaceName: "eth0"},
		{Name: "lan", MacAddress: "02:00:00:00:00:02", Info: "no DHCP lease for 02:00:00:00:00:02"},
	}
	var diags diagsT
	list := interfaceStatusList(vmi, &diags.d)
	if diags.d.HasError() {
		t.Fatal(diags.d)
	}
	got := list.String()
	for _, want := range []string{
		`"ip_address":"10.0.2.15"`, `"ip_addresses":["10.0.2.15","fec0::5054:ff:fe12:3456"]`, `"source":"agent"`,
		`"interface_name":"eth0"`, `"info":<null>`,
		`"ip_address":<null>`, `"ip_addresses":[]`, `"info":"no DHCP lease for 02:00:00:00:00:02"`, `"source":<null>`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("status.interfaces = %s\nlacks %s", got, want)
		}
	}
	for name, vmi := range map[string]*apiv1.VirtualMachineInstance{"no instance": nil, "finished": vmiWith("i2", apiv1.PhaseSucceeded, false)} {
		if vmi != nil {
			vmi.Status.Interfaces = []*apiv1.InterfaceStatus{{Name: "default", IpAddress: "10.0.2.15"}}
		}
		l := interfaceStatusList(vmi, &diags.d)
		if l.IsNull() || len(l.Elements()) != 0 {
			t.Errorf("%s: status.interfaces = %s, want []", name, l)
		}
	}
}
