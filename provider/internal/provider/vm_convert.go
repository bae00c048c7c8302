package provider

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the Terraform model and the API object. The
// schema is flatter than the API: a disk block is a disk plus the volume of
// the same name, an interface block is an interface plus its network
// (vm_convert_network.go), annotations go to the instance template.

// vmID is the resource id: "namespace/name".
func vmID(namespace, name string) string { return namespace + "/" + name }

// parseVMID accepts "namespace/name" and a bare "name" (default namespace).
func parseVMID(id string) (namespace, name string, err error) {
	parts := strings.Split(id, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return apiv1.DefaultNamespace, parts[0], nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return parts[0], parts[1], nil
	}
	return "", "", fmt.Errorf("want namespace/name or name, got %q", id)
}

// vmFromModel builds the VM the configuration asks for. Unset optional
// values are left zero, which the agent fills with the same defaults as the
// schema. All values must be known (apply time).
func vmFromModel(ctx context.Context, m *vmModel) (*apiv1.VirtualMachine, diag.Diagnostics) {
	var diags diag.Diagnostics
	tspec := &apiv1.VirtualMachineInstanceSpec{
		Domain: &apiv1.DomainSpec{
			Cpu:     &apiv1.CPU{},
			Memory:  &apiv1.Memory{Guest: m.Memory.ValueString()},
			Devices: &apiv1.Devices{},
		},
		NodeSelector: stringMap(ctx, m.NodeSelector, &diags),
		// Null is "": the cluster's default strategy applies.
		EvictionStrategy: m.EvictionStrategy.ValueString(),
	}
	if c := m.CPU; c != nil {
		tspec.Domain.Cpu = &apiv1.CPU{
			Cores: int32(c.Cores.ValueInt64()), Sockets: int32(c.Sockets.ValueInt64()), Threads: int32(c.Threads.ValueInt64()),
		}
	}
	if !m.TerminationGracePeriod.IsNull() && !m.TerminationGracePeriod.IsUnknown() {
		g := m.TerminationGracePeriod.ValueInt64()
		tspec.TerminationGracePeriodSeconds = &g
	}
	for _, d := range m.Disks {
		disk, vol := diskFromModel(d)
		tspec.Domain.Devices.Disks = append(tspec.Domain.Devices.Disks, disk)
		tspec.Volumes = append(tspec.Volumes, vol)
	}
	if len(m.Interfaces) > 0 {
		tspec.Domain.Devices.Interfaces, tspec.Networks = interfacesFromModel(m.Interfaces)
	}
	if b := m.Boot; b != nil {
		tspec.Domain.Firmware = &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{
			Kernel: b.Kernel.ValueString(), Initrd: b.Initrd.ValueString(), Cmdline: b.Cmdline.ValueString(),
		}}
	}
	if bl := m.Bootloader; bl != nil {
		if tspec.Domain.Firmware == nil {
			tspec.Domain.Firmware = &apiv1.Firmware{}
		}
		tspec.Domain.Firmware.Bootloader = bootloaderFromModel(bl)
	}
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{
			Namespace: m.Namespace.ValueString(),
			Name:      m.Name.ValueString(),
			Labels:    stringMap(ctx, m.Labels, &diags),
		},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy:       m.RunStrategy.ValueString(),
			NodeFailurePolicy: m.NodeFailurePolicy.ValueString(),
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Annotations: stringMap(ctx, m.Annotations, &diags)},
				Spec:     tspec,
			},
		},
	}
	return vm, diags
}

func bootloaderFromModel(bl *bootloaderModel) *apiv1.Bootloader {
	out := &apiv1.Bootloader{}
	if bl.BIOS != nil {
		out.Bios = &apiv1.BIOSBootloader{}
	}
	if bl.EFI != nil {
		out.Efi = &apiv1.EFIBootloader{SecureBoot: bl.EFI.SecureBoot.ValueBool()}
	}
	return out
}

// bootloaderToModel reads the bootloader back as it was written: a
// secure_boot left out stays null while it is off.
func bootloaderToModel(bl *apiv1.Bootloader, prior *bootloaderModel) *bootloaderModel {
	if bl == nil {
		return nil
	}
	out := &bootloaderModel{}
	if bl.GetBios() != nil {
		out.BIOS = &biosModel{}
	}
	if e := bl.GetEfi(); e != nil {
		sb := types.BoolNull()
		if e.GetSecureBoot() || (prior != nil && prior.EFI != nil && !prior.EFI.SecureBoot.IsNull() && !prior.EFI.SecureBoot.IsUnknown()) {
			sb = types.BoolValue(e.GetSecureBoot())
		}
		out.EFI = &efiModel{SecureBoot: sb}
	}
	return out
}

// diskFromModel splits a disk block into the API's disk and volume. A
// cloud-init seed is attached as a CD-ROM, as cloud-init's NoCloud
// datasource expects.
func diskFromModel(d diskModel) (*apiv1.Disk, *apiv1.Volume) {
	name := d.Name.ValueString()
	disk := &apiv1.Disk{Name: name, BootOrder: int32(d.BootOrder.ValueInt64())}
	vol := &apiv1.Volume{Name: name}
	switch {
	case d.CloudInit != nil:
		disk.Cdrom = &apiv1.CDRomTarget{Bus: d.Bus.ValueString()}
		vol.CloudInitNoCloud = &apiv1.CloudInitNoCloud{
			UserData: d.CloudInit.UserData.ValueString(), NetworkData: d.CloudInit.NetworkData.ValueString(),
		}
	case d.Persistent != nil:
		disk.Disk = &apiv1.DiskTarget{Bus: d.Bus.ValueString()}
		vol.Persistent = &apiv1.PersistentVolume{Size: d.Persistent.Size.ValueString(), Image: d.Persistent.Image.ValueString()}
	default:
		disk.Disk = &apiv1.DiskTarget{Bus: d.Bus.ValueString()}
		vol.Image = &apiv1.ImageVolume{Name: d.Image.ValueString()}
	}
	return disk, vol
}

// mergeVM applies what Terraform manages (want) onto the stored VM (cur)
// and returns the object to write. What the schema does not model is kept
// as stored, so that an apply never clobbers settings made with other tools:
// VM annotations, template labels, disk serials and read-only flags. The
// eviction strategy is managed: a configuration without one clears it, so
// that the cluster's default applies.
func mergeVM(cur, want *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	next := proto.Clone(cur).(*apiv1.VirtualMachine)
	if next.Metadata == nil {
		next.Metadata = &apiv1.ObjectMeta{}
	}
	next.Metadata.Labels = want.GetMetadata().GetLabels()
	if next.Spec == nil {
		next.Spec = &apiv1.VirtualMachineSpec{}
	}
	spec := next.Spec
	//lint:ignore SA1019 clearing the deprecated flag is how a VM moves to run_strategy
	spec.Running = nil
	spec.RunStrategy = want.GetSpec().GetRunStrategy()
	spec.NodeFailurePolicy = want.GetSpec().GetNodeFailurePolicy()
	if spec.Template == nil {
		spec.Template = &apiv1.VirtualMachineInstanceTemplateSpec{}
	}
	if spec.Template.Metadata == nil {
		spec.Template.Metadata = &apiv1.ObjectMeta{}
	}
	spec.Template.Metadata.Annotations = want.GetSpec().GetTemplate().GetMetadata().GetAnnotations()

	old := spec.Template.GetSpec()
	ts := proto.Clone(want.GetSpec().GetTemplate().GetSpec()).(*apiv1.VirtualMachineInstanceSpec)
	ts.Paused = old.GetPaused()
	oldDisks := map[string]*apiv1.Disk{}
	for _, d := range old.GetDomain().GetDevices().GetDisks() {
		oldDisks[d.GetName()] = d
	}
	for _, d := range ts.GetDomain().GetDevices().GetDisks() {
		o := oldDisks[d.GetName()]
		if o == nil {
			continue
		}
		d.Serial = o.GetSerial()
		switch {
		case d.Disk != nil && o.Disk != nil:
			d.Disk.ReadOnly = o.Disk.GetReadOnly()
		case d.Disk != nil && o.Cdrom != nil && slices.Contains(apiv1.CDRomBuses(), d.Disk.Bus):
			// An image attached as a CD-ROM by another tool stays one: the
			// schema shows only its bus.
			d.Cdrom, d.Disk = &apiv1.CDRomTarget{Bus: d.Disk.Bus}, nil
		}
	}
	spec.Template.Spec = ts
	return next
}

// readOptions tune vmToModel.
type readOptions struct {
	// prior is the state or plan being refreshed; nil on import and in the
	// data source. It decides between null and empty and whether default
	// blocks are shown.
	prior *vmModel
	// full shows every block and map, defaults included (data source).
	full bool
}

// vmToModel maps a VM and its instance (nil when there is none) to the
// model. Every attribute a configuration can set is read back, so that
// drift shows in plans and imports are complete; values equal to the
// agent's defaults come back in the form an unset attribute has.
func vmToModel(ctx context.Context, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, o readOptions) (vmModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	prior := o.prior
	if prior == nil {
		prior = &vmModel{}
	}
	md := vm.GetMetadata()
	spec := vm.GetSpec()
	tmpl := spec.GetTemplate()
	ts := tmpl.GetSpec()
	dom := ts.GetDomain()

	m := vmModel{
		ID:                types.StringValue(vmID(md.GetNamespace(), md.GetName())),
		Name:              types.StringValue(md.GetName()),
		Namespace:         types.StringValue(md.GetNamespace()),
		UID:               types.StringValue(md.GetUid()),
		Labels:            mapFromAPI(md.GetLabels(), prior.Labels, o.full, &diags),
		Annotations:       mapFromAPI(tmpl.GetMetadata().GetAnnotations(), prior.Annotations, o.full, &diags),
		RunStrategy:       types.StringValue(runStrategyOf(spec)),
		Memory:            quantityOf(dom.GetMemory().GetGuest()),
		NodeSelector:      mapFromAPI(ts.GetNodeSelector(), prior.NodeSelector, o.full, &diags),
		NodeFailurePolicy: types.StringValue(orDefault(spec.GetNodeFailurePolicy(), apiv1.DefaultNodeFailurePolicy)),
		// "" is unset (the cluster's default), which the schema has as null:
		// the validator refuses "" in a configuration.
		EvictionStrategy:       optString(ts.GetEvictionStrategy()),
		TerminationGracePeriod: types.Int64Value(ts.GracePeriodSeconds()),
		RestartRequired:        types.BoolValue(apiv1.IsConditionTrue(vm.GetStatus().GetConditions(), apiv1.ConditionRestartRequired)),
		Disks:                  []diskModel{},
	}

	cpu := cpuModel{
		Cores:   types.Int64Value(int64(max(dom.GetCpu().GetCores(), 1))),
		Sockets: types.Int64Value(int64(max(dom.GetCpu().GetSockets(), 1))),
		Threads: types.Int64Value(int64(max(dom.GetCpu().GetThreads(), 1))),
	}
	// No cpu block means 1/1/1; keep it absent while the VM has exactly
	// that, so configurations without the block (and imports) stay clean.
	if o.full || prior.CPU != nil || cpu.Cores.ValueInt64() != 1 || cpu.Sockets.ValueInt64() != 1 || cpu.Threads.ValueInt64() != 1 {
		m.CPU = &cpu
	}

	volumes := map[string]*apiv1.Volume{}
	for _, v := range ts.GetVolumes() {
		volumes[v.GetName()] = v
	}
	for i, d := range dom.GetDevices().GetDisks() {
		var p *diskModel
		if i < len(prior.Disks) && prior.Disks[i].Name.ValueString() == d.GetName() {
			p = &prior.Disks[i]
		}
		m.Disks = append(m.Disks, diskToModel(d, volumes[d.GetName()], p))
	}

	m.Interfaces = interfacesToModel(dom.GetDevices().GetInterfaces(), ts.GetNetworks(), prior.Interfaces)

	if kb := dom.GetFirmware().GetKernelBoot(); kb != nil {
		var pb bootModel
		if prior.Boot != nil {
			pb = *prior.Boot
		}
		m.Boot = &bootModel{
			Kernel:  types.StringValue(kb.GetKernel()),
			Initrd:  readString(kb.GetInitrd(), pb.Initrd),
			Cmdline: readString(kb.GetCmdline(), pb.Cmdline),
		}
	}

	m.Bootloader = bootloaderToModel(dom.GetFirmware().GetBootloader(), prior.Bootloader)

	m.Status = statusObject(vm, vmi, &diags)
	return m, diags
}

func diskToModel(d *apiv1.Disk, vol *apiv1.Volume, prior *diskModel) diskModel {
	if prior == nil {
		prior = &diskModel{}
	}
	dm := diskModel{Name: types.StringValue(d.GetName()), BootOrder: types.Int64Null(), Image: types.StringNull()}
	switch {
	case d.GetCdrom() != nil:
		dm.Bus = types.StringValue(orDefault(d.GetCdrom().GetBus(), apiv1.DefaultCDRomBus))
	default:
		dm.Bus = types.StringValue(orDefault(d.GetDisk().GetBus(), apiv1.DefaultDiskBus))
	}
	if bo := d.GetBootOrder(); bo > 0 {
		dm.BootOrder = types.Int64Value(int64(bo))
	}
	switch {
	case vol.GetCloudInitNoCloud() != nil:
		var pc cloudInitModel
		if prior.CloudInit != nil {
			pc = *prior.CloudInit
		}
		ci := vol.GetCloudInitNoCloud()
		dm.CloudInit = &cloudInitModel{
			// Computed as well as optional, so never null once known.
			UserData:    types.StringValue(ci.GetUserData()),
			NetworkData: readString(ci.GetNetworkData(), pc.NetworkData),
		}
	case vol.GetPersistent() != nil:
		var pp persistentModel
		if prior.Persistent != nil {
			pp = *prior.Persistent
		}
		dm.Persistent = &persistentModel{
			Size:  quantityOf(vol.GetPersistent().GetSize()),
			Image: readString(vol.GetPersistent().GetImage(), pp.Image),
		}
	case vol.GetImage() != nil:
		dm.Image = types.StringValue(vol.GetImage().GetName())
	}
	return dm
}

// runStrategyOf is the VM's effective run strategy; a VM that sets both
// fields (which the API refuses) shows its run_strategy.
func runStrategyOf(spec *apiv1.VirtualMachineSpec) string {
	if s, err := spec.EffectiveRunStrategy(); err == nil {
		return s
	}
	return spec.GetRunStrategy()
}

// statusObject is the computed status attribute.
func statusObject(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, diags *diag.Diagnostics) types.Object {
	st := vm.GetStatus()
	conds := make([]attr.Value, 0, len(st.GetConditions()))
	for _, c := range st.GetConditions() {
		obj, d := types.ObjectValue(conditionAttrTypes, map[string]attr.Value{
			"type":    types.StringValue(c.GetType()),
			"status":  types.StringValue(c.GetStatus()),
			"reason":  types.StringValue(c.GetReason()),
			"message": types.StringValue(c.GetMessage()),
		})
		diags.Append(d...)
		conds = append(conds, obj)
	}
	list, d := types.ListValue(types.ObjectType{AttrTypes: conditionAttrTypes}, conds)
	diags.Append(d...)
	obj, d := types.ObjectValue(statusAttrTypes, map[string]attr.Value{
		"printable_status": optString(st.GetPrintableStatus()),
		"phase":            optString(vmi.GetStatus().GetPhase()),
		"ready":            types.BoolValue(st.GetReady()),
		"node":             optString(vmi.GetStatus().GetNodeName()),
		"conditions":       list,
		"interfaces":       interfaceStatusList(vmi, diags),
	})
	diags.Append(d...)
	return obj
}

// readString maps "" to null, unless the prior value was a known "" (a
// configuration that says `x = ""` must read back as "", not null).
func readString(s string, prior types.String) types.String {
	if s != "" {
		return types.StringValue(s)
	}
	if !prior.IsNull() && !prior.IsUnknown() && prior.ValueString() == "" {
		return types.StringValue("")
	}
	return types.StringNull()
}

// mapFromAPI maps an empty map to null, unless the prior value was a known
// empty map or full is set (data sources return empty maps, so lookup()
// works on them).
func mapFromAPI(m map[string]string, prior types.Map, full bool, diags *diag.Diagnostics) types.Map {
	if len(m) == 0 && !full && (prior.IsNull() || prior.IsUnknown()) {
		return types.MapNull(types.StringType)
	}
	if m == nil {
		m = map[string]string{}
	}
	v, d := types.MapValueFrom(context.Background(), types.StringType, m)
	diags.Append(d...)
	return v
}

// stringMap converts a known map attribute; null gives nil.
func stringMap(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	if len(out) == 0 {
		return nil
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// attributePath maps an API field path from a validation error
// ("spec.template.spec.domain.devices.disks[1].name") to the attribute
// that set it (disk[1].name). ok is false for fields the schema does not
// expose; such errors are reported against the whole resource.
func attributePath(field string) (path.Path, bool) {
	norm, args := normalizeFieldPath(field)
	// listElem is the list element the first [i] of norm names.
	listElem := func(root string) (path.Path, bool) {
		if len(args) == 0 {
			return path.Root(root), true
		}
		i, err := strconv.Atoi(args[0])
		if err != nil {
			return path.Root(root), true
		}
		return path.Root(root).AtListIndex(i), true
	}
	// mapKey is the map attribute root, at the key of the first [k].
	mapKey := func(root string) (path.Path, bool) {
		if len(args) == 0 {
			return path.Root(root), true
		}
		return path.Root(root).AtMapKey(args[0]), true
	}
	const (
		tmplSpec = "spec.template.spec."
		domain   = tmplSpec + "domain."
		disks    = domain + "devices.disks[*]"
		ifaces   = domain + "devices.interfaces[*]"
		volumes  = tmplSpec + "volumes[*]"
		networks = tmplSpec + "networks[*]"
	)
	switch {
	case norm == "metadata.name", norm == "metadata.namespace":
		return path.Root(strings.TrimPrefix(norm, "metadata.")), true
	case strings.HasPrefix(norm, "metadata.labels"):
		return mapKey("labels")
	case norm == "spec.run_strategy", norm == "spec.running":
		return path.Root("run_strategy"), true
	case norm == "spec.node_failure_policy":
		return path.Root("node_failure_policy"), true
	case strings.HasPrefix(norm, "spec.template.metadata.annotations"):
		return mapKey("annotations")
	case strings.HasPrefix(norm, tmplSpec+"node_selector"):
		return mapKey("node_selector")
	case norm == tmplSpec+"termination_grace_period_seconds":
		return path.Root("termination_grace_period"), true
	case norm == tmplSpec+"eviction_strategy":
		return path.Root("eviction_strategy"), true
	case strings.HasPrefix(norm, domain+"cpu"):
		if n := strings.TrimPrefix(norm, domain+"cpu."); n == "cores" || n == "sockets" || n == "threads" {
			return path.Root("cpu").AtName(n), true
		}
		return path.Root("cpu"), true
	case strings.HasPrefix(norm, domain+"memory"):
		return path.Root("memory"), true
	case strings.HasPrefix(norm, domain+"firmware.bootloader"):
		switch strings.TrimPrefix(norm, domain+"firmware.bootloader") {
		case ".bios":
			return path.Root("bootloader").AtName("bios"), true
		case ".efi":
			return path.Root("bootloader").AtName("efi"), true
		case ".efi.secure_boot":
			return path.Root("bootloader").AtName("efi").AtName("secure_boot"), true
		}
		return path.Root("bootloader"), true
	case strings.HasPrefix(norm, domain+"firmware"):
		if n := strings.TrimPrefix(norm, domain+"firmware.kernel_boot."); n == "kernel" || n == "initrd" || n == "cmdline" {
			return path.Root("boot").AtName(n), true
		}
		return path.Root("boot"), true
	case strings.HasPrefix(norm, disks):
		p, _ := listElem("disk")
		switch strings.TrimPrefix(norm, disks) {
		case ".name":
			return p.AtName("name"), true
		case ".boot_order":
			return p.AtName("boot_order"), true
		case ".disk", ".disk.bus", ".cdrom", ".cdrom.bus":
			return p.AtName("bus"), true
		}
		return p, true
	case strings.HasPrefix(norm, ifaces):
		p, _ := listElem("interface")
		switch n := strings.TrimPrefix(norm, ifaces+"."); n {
		case "name", "model", "mac_address":
			return p.AtName(n), true
		}
		return p, true
	case strings.HasPrefix(norm, volumes):
		// Volumes are written in disk order, one per disk.
		p, _ := listElem("disk")
		switch n := strings.TrimPrefix(norm, volumes+"."); n {
		case "name":
			return p.AtName("name"), true
		case "image", "image.name":
			return p.AtName("image"), true
		case "persistent.size", "persistent.image":
			return p.AtName("persistent").AtName(strings.TrimPrefix(n, "persistent.")), true
		case "cloud_init_no_cloud.user_data", "cloud_init_no_cloud.network_data":
			return p.AtName("cloud_init").AtName(strings.TrimPrefix(n, "cloud_init_no_cloud.")), true
		case "persistent":
			return p.AtName("persistent"), true
		case "cloud_init_no_cloud":
			return p.AtName("cloud_init"), true
		}
		return p, true
	case norm == tmplSpec+"networks", norm == domain+"devices.interfaces":
		return path.Root("interface"), true // their number
	case strings.HasPrefix(norm, networks):
		return networkAttributePath(strings.TrimPrefix(norm, networks), args), true
	}
	return path.Empty(), false
}

// normalizeFieldPath replaces every [index] or [key] of a Kubernetes field
// path with [*] and returns their contents in order.
func normalizeFieldPath(field string) (string, []string) {
	var b strings.Builder
	var args []string
	for {
		open := strings.IndexByte(field, '[')
		if open < 0 {
			b.WriteString(field)
			break
		}
		end := strings.IndexByte(field[open:], ']')
		if end < 0 {
			b.WriteString(field)
			break
		}
		b.WriteString(field[:open])
		b.WriteString("[*]")
		args = append(args, field[open+1:open+end])
		field = field[open+end+1:]
	}
	return b.String(), args
}
