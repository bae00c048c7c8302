package provider

import (
	"cmp"
	"context"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions of what a VM, a pool's VMs and a replica set's instances
// are made from, between the model and the API. The schema is flatter
// than the API: a disk block is a disk plus the volume of the same name,
// an interface block is an interface plus its network
// (template_convert_network.go), annotations go to the instance template.

// instanceSpecFromModel builds the instance spec m asks for. Unset
// optional values are left zero, which the agent fills with the same
// defaults as the schema. All values must be known (apply time).
func instanceSpecFromModel(ctx context.Context, m *instanceSpecModel, diags *diag.Diagnostics) *apiv1.VirtualMachineInstanceSpec {
	tspec := &apiv1.VirtualMachineInstanceSpec{
		Domain: &apiv1.DomainSpec{
			Cpu:     &apiv1.CPU{},
			Memory:  &apiv1.Memory{Guest: m.Memory.ValueString()},
			Devices: &apiv1.Devices{},
		},
		NodeSelector: stringMap(ctx, m.NodeSelector, diags),
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
	return tspec
}

// vmSpecFromModel builds the VM spec m asks for, and the VM's labels.
func vmSpecFromModel(ctx context.Context, m *vmSpecModel, diags *diag.Diagnostics) (map[string]string, *apiv1.VirtualMachineSpec) {
	return stringMap(ctx, m.Labels, diags), &apiv1.VirtualMachineSpec{
		RunStrategy:       m.RunStrategy.ValueString(),
		NodeFailurePolicy: m.NodeFailurePolicy.ValueString(),
		Template: &apiv1.VirtualMachineInstanceTemplateSpec{
			Metadata: &apiv1.ObjectMeta{Annotations: stringMap(ctx, m.Annotations, diags)},
			Spec:     instanceSpecFromModel(ctx, &m.instanceSpecModel, diags),
		},
	}
}

// instanceTemplateFromModel builds the instance template m asks for.
func instanceTemplateFromModel(ctx context.Context, m *instanceTemplateModel, diags *diag.Diagnostics) *apiv1.VirtualMachineInstanceTemplateSpec {
	return &apiv1.VirtualMachineInstanceTemplateSpec{
		Metadata: &apiv1.ObjectMeta{Labels: stringMap(ctx, m.Labels, diags), Annotations: stringMap(ctx, m.Annotations, diags)},
		Spec:     instanceSpecFromModel(ctx, &m.instanceSpecModel, diags),
	}
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
		vol.Persistent = &apiv1.PersistentVolume{Size: d.Persistent.Size.ValueString(), Image: d.Persistent.Image.ValueString(),
			StorageClass: d.Persistent.StorageClass.ValueString(), Hotpluggable: d.Persistent.Hotpluggable.ValueBool()}
	default:
		disk.Disk = &apiv1.DiskTarget{Bus: d.Bus.ValueString()}
		vol.Image = &apiv1.ImageVolume{Name: d.Image.ValueString()}
	}
	return disk, vol
}

// mergeVMSpec applies what Terraform manages of a VM spec (want) onto the
// stored one (cur, nil for none) and returns the spec to write: the
// instance template's labels are kept as stored (the schema does not model
// them), and so is what mergeInstanceSpec keeps.
func mergeVMSpec(cur, want *apiv1.VirtualMachineSpec) *apiv1.VirtualMachineSpec {
	spec, _ := proto.Clone(cur).(*apiv1.VirtualMachineSpec)
	if spec == nil {
		spec = &apiv1.VirtualMachineSpec{}
	}
	//lint:ignore SA1019 clearing the deprecated flag is how a VM moves to run_strategy
	spec.Running = nil
	spec.RunStrategy = want.GetRunStrategy()
	spec.NodeFailurePolicy = want.GetNodeFailurePolicy()
	if spec.Template == nil {
		spec.Template = &apiv1.VirtualMachineInstanceTemplateSpec{}
	}
	if spec.Template.Metadata == nil {
		spec.Template.Metadata = &apiv1.ObjectMeta{}
	}
	spec.Template.Metadata.Annotations = withServerOwned(want.GetTemplate().GetMetadata().GetAnnotations(), spec.Template.Metadata.GetAnnotations())
	spec.Template.Spec = mergeInstanceSpec(spec.Template.GetSpec(), want.GetTemplate().GetSpec())
	return spec
}

// mergeInstanceSpec is the instance spec want asks for, with what the
// schema does not model kept from old: the paused flag, disk serials and
// read-only flags, and CD-ROMs attached by other tools. The eviction
// strategy is managed: a configuration without one clears it, so that the
// cluster's default applies.
func mergeInstanceSpec(old, want *apiv1.VirtualMachineInstanceSpec) *apiv1.VirtualMachineInstanceSpec {
	ts, _ := proto.Clone(want).(*apiv1.VirtualMachineInstanceSpec)
	if ts == nil {
		ts = &apiv1.VirtualMachineInstanceSpec{}
	}
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
	return ts
}

// instanceSpecToModel maps an instance spec to the model. Every attribute
// a configuration can set is read back, so that drift shows in plans and
// imports are complete; values equal to the agent's defaults come back in
// the form an unset attribute has. prior (nil on import and in data
// sources) decides between null and empty and whether default blocks are
// shown; full shows every block and map, defaults included (data sources).
func instanceSpecToModel(ts *apiv1.VirtualMachineInstanceSpec, prior *instanceSpecModel, full bool, diags *diag.Diagnostics) instanceSpecModel {
	if prior == nil {
		prior = &instanceSpecModel{}
	}
	dom := ts.GetDomain()
	m := instanceSpecModel{
		Memory:       quantityOf(dom.GetMemory().GetGuest()),
		NodeSelector: mapFromAPI(ts.GetNodeSelector(), prior.NodeSelector, full, diags),
		// "" is unset (the cluster's default), which the schema has as null:
		// the validator refuses "" in a configuration.
		EvictionStrategy:       optString(ts.GetEvictionStrategy()),
		TerminationGracePeriod: types.Int64Value(ts.GracePeriodSeconds()),
		Disks:                  []diskModel{},
	}

	cpu := cpuModel{
		Cores:   types.Int64Value(int64(max(dom.GetCpu().GetCores(), 1))),
		Sockets: types.Int64Value(int64(max(dom.GetCpu().GetSockets(), 1))),
		Threads: types.Int64Value(int64(max(dom.GetCpu().GetThreads(), 1))),
	}
	// No cpu block means 1/1/1; keep it absent while the spec has exactly
	// that, so configurations without the block (and imports) stay clean.
	if full || prior.CPU != nil || cpu.Cores.ValueInt64() != 1 || cpu.Sockets.ValueInt64() != 1 || cpu.Threads.ValueInt64() != 1 {
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
	return m
}

// vmSpecToModel maps a VM spec and the VM's labels to the model, as
// instanceSpecToModel does.
func vmSpecToModel(labels map[string]string, spec *apiv1.VirtualMachineSpec, prior *vmSpecModel, full bool, diags *diag.Diagnostics) vmSpecModel {
	if prior == nil {
		prior = &vmSpecModel{}
	}
	tmpl := spec.GetTemplate()
	return vmSpecModel{
		Labels:            mapFromAPI(labels, prior.Labels, full, diags),
		Annotations:       mapFromAPI(withoutServerOwned(tmpl.GetMetadata().GetAnnotations()), prior.Annotations, full, diags),
		RunStrategy:       types.StringValue(runStrategyOf(spec)),
		NodeFailurePolicy: types.StringValue(cmp.Or(spec.GetNodeFailurePolicy(), apiv1.DefaultNodeFailurePolicy)),
		instanceSpecModel: instanceSpecToModel(tmpl.GetSpec(), &prior.instanceSpecModel, full, diags),
	}
}

// instanceTemplateToModel maps an instance template to the model, as
// instanceSpecToModel does.
func instanceTemplateToModel(t *apiv1.VirtualMachineInstanceTemplateSpec, prior *instanceTemplateModel, full bool, diags *diag.Diagnostics) instanceTemplateModel {
	if prior == nil {
		prior = &instanceTemplateModel{}
	}
	return instanceTemplateModel{
		Labels:            mapFromAPI(t.GetMetadata().GetLabels(), prior.Labels, full, diags),
		Annotations:       mapFromAPI(t.GetMetadata().GetAnnotations(), prior.Annotations, full, diags),
		instanceSpecModel: instanceSpecToModel(t.GetSpec(), &prior.instanceSpecModel, full, diags),
	}
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

func diskToModel(d *apiv1.Disk, vol *apiv1.Volume, prior *diskModel) diskModel {
	if prior == nil {
		prior = &diskModel{}
	}
	dm := diskModel{Name: types.StringValue(d.GetName()), BootOrder: types.Int64Null(), Image: types.StringNull()}
	switch {
	case d.GetCdrom() != nil:
		dm.Bus = types.StringValue(cmp.Or(d.GetCdrom().GetBus(), apiv1.DefaultCDRomBus))
	default:
		dm.Bus = types.StringValue(cmp.Or(d.GetDisk().GetBus(), apiv1.DefaultDiskBus))
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
			// As written: unset and "local" are the same class, and the
			// agent stores either as given.
			StorageClass: readString(vol.GetPersistent().GetStorageClass(), pp.StorageClass),
			Hotpluggable: readBool(vol.GetPersistent().GetHotpluggable(), pp.Hotpluggable),
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
