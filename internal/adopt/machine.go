package adopt

import (
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// units are libvirt's memory units in bytes (formatdomain "Memory
// Allocation"): the live XML always says KiB, a definition by hand may
// say any of these.
var units = map[string]uint64{
	"": 1024, "b": 1, "bytes": 1,
	"KB": 1000, "k": 1024, "KiB": 1024,
	"MB": 1000 * 1000, "M": 1 << 20, "MiB": 1 << 20,
	"GB": 1000 * 1000 * 1000, "G": 1 << 30, "GiB": 1 << 30,
	"TB": 1000 * 1000 * 1000 * 1000, "T": 1 << 40, "TiB": 1 << 40,
}

// maxMemoryBytes keeps the product inside int64 (validation bounds the
// guest memory far below).
const maxMemoryBytes = 1 << 50

// machine maps memory, CPUs and the firmware.
func (m *mapper) machine() {
	d, spec := m.dom, m.res.Spec.Domain
	if mem := d.Memory; mem == nil || mem.Value == 0 {
		m.res.Refuse("memory", "the domain states no memory")
	} else if unit, ok := units[mem.Unit]; !ok {
		m.res.Refuse("memory", "unknown unit %q", mem.Unit)
	} else if b := uint64(mem.Value) * unit; uint64(mem.Value) > maxMemoryBytes/unit {
		m.res.Refuse("memory", "%d %s is more than any host has", mem.Value, mem.Unit)
	} else {
		spec.Memory = &apiv1.Memory{Guest: resource.NewQuantity(int64(b), resource.BinarySI).String()}
		if cur := d.CurrentMemory; cur != nil && cur.Value != 0 && cur.Value != mem.Value {
			m.res.Note("the balloon's current memory is not carried: the guest gets all %s", spec.Memory.Guest)
		}
	}

	vcpus := uint(1)
	if v := d.VCPU; v != nil && v.Value > 0 {
		vcpus = v.Value
		if v.Current != 0 && v.Current != v.Value {
			m.res.Note("vCPU hotplug (%d of %d online) is not carried: the guest gets %d", v.Current, v.Value, v.Value)
		}
		if v.CPUSet != "" {
			m.res.Note("the vCPUs' host CPU set is not carried")
		}
	}
	spec.Cpu = &apiv1.CPU{Sockets: 1, Cores: int32(min(vcpus, 1<<20)), Threads: 1}
	if c := d.CPU; c != nil {
		if t := c.Topology; t != nil {
			if t.Sockets*max(t.Dies, 1)*max(t.Clusters, 1)*t.Cores*t.Threads == int(vcpus) && max(t.Dies, 1) == 1 && max(t.Clusters, 1) == 1 {
				spec.Cpu = &apiv1.CPU{Sockets: int32(t.Sockets), Cores: int32(t.Cores), Threads: int32(t.Threads)}
			} else {
				m.res.Note("the CPU topology (sockets %d, dies %d, clusters %d, cores %d, threads %d) becomes %d cores", t.Sockets, t.Dies, t.Clusters, t.Cores, t.Threads, vcpus)
			}
		}
		if c.Mode != "" || c.Model != nil {
			m.res.Note("the CPU model becomes virtplane's (host-passthrough under KVM, maximum under TCG)")
		}
		if c.Numa != nil {
			m.res.Note("the guest NUMA topology is not carried")
		}
	}
	m.os()
}

// distroFirmware is where distributions install firmware (OVMF,
// SeaBIOS): a loader elsewhere is a custom build, which virtplane would
// not boot the guest with.
const distroFirmware = "/usr/share/"

func (m *mapper) os() {
	o := m.dom.OS
	if o == nil || o.Type == nil {
		m.res.Refuse("os", "the domain states no OS type")
		return
	}
	if o.Type.Type != "hvm" {
		m.res.Refuse("os.type", "%q: only full virtualization (hvm) can be adopted", o.Type.Type)
	}
	if a := o.Type.Arch; a != "" && a != "x86_64" {
		m.res.Refuse("os.type.arch", "%q: virtplane runs x86_64 guests", a)
	}
	if mt := o.Type.Machine; mt != "" && !strings.Contains(mt, "q35") {
		m.res.Note("the machine type %s becomes q35 at the first start through virtplane: the guest sees a new chipset (IDE disks become SATA)", mt)
	}
	for _, r := range []struct{ what, value string }{{"os.dtb", o.DTB}, {"os.shim", o.Shim}, {"os.init", o.Init}} {
		if r.value != "" {
			m.res.Refuse(r.what, "not a QEMU x86 guest's")
		}
	}
	if o.ACPI != nil && len(o.ACPI.Tables) > 0 {
		m.res.Refuse("os.acpi", "custom ACPI tables are not carried")
	}
	if o.BootMenu != nil {
		m.res.Note("the boot menu is not carried")
	}
	if o.SMBios != nil {
		m.res.Note("the SMBIOS mode is not carried")
	}
	for i, b := range o.BootDevices {
		if b.Dev != "hd" {
			m.res.Note("os.boot[%d]: booting from %s is not carried: virtplane boots from the disks", i, b.Dev)
		}
	}
	fw := &apiv1.Firmware{}
	efi, secure := o.Firmware == "efi", false
	if o.FirmwareInfo != nil {
		for _, f := range o.FirmwareInfo.Features {
			if f.Name == "secure-boot" && f.Enabled == "yes" {
				secure = true
			}
		}
	}
	if l := o.Loader; l != nil {
		switch {
		case l.Path != "" && !strings.HasPrefix(filepath.Clean(l.Path), distroFirmware):
			m.res.Refuse("os.loader", "firmware %s is not one the distribution installed (under %s): virtplane boots distribution firmware", l.Path, distroFirmware)
		case l.Type == "pflash":
			efi = true
		case l.Type == "rom" || l.Type == "":
			// SeaBIOS, as the distribution ships it.
		default:
			m.res.Refuse("os.loader", "loader type %q", l.Type)
		}
		if l.Secure == "yes" {
			secure = true
		}
		if l.Stateless == "yes" {
			m.res.Refuse("os.loader", "stateless firmware is not carried")
		}
	}
	if efi {
		fw.Bootloader = &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{SecureBoot: secure}}
		if nv := o.NVRam; nv != nil {
			switch {
			case nv.Source != nil:
				m.res.Note("the EFI variables on %s are not carried: the guest starts from the firmware's template", "a network or block NVRAM")
			case nv.NVRam != "":
				m.res.NVRAM = nv.NVRam
			}
		}
	} else {
		fw.Bootloader = &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}
	}
	if o.Kernel != "" {
		kernel, ok := m.imageName("os.kernel", o.Kernel)
		kb := &apiv1.KernelBoot{Kernel: kernel, Cmdline: o.Cmdline}
		if o.Initrd != "" {
			initrd, iok := m.imageName("os.initrd", o.Initrd)
			kb.Initrd, ok = initrd, ok && iok
		}
		if ok {
			fw.KernelBoot = kb
			if !efi {
				fw.Bootloader = nil // kernel boot needs no boot loader
			}
		}
	} else if o.Initrd != "" || o.Cmdline != "" {
		m.res.Refuse("os.initrd", "an initrd or kernel command line without a kernel")
	}
	m.res.Spec.Domain.Firmware = fw
}

// imageName is the image name of file p in the node image directory:
// kernels, initrds and CD-ROM images are images there, by name.
func (m *mapper) imageName(element, p string) (string, bool) {
	dir := m.rules.ImageDir
	if dir == "" || !filepath.IsAbs(p) {
		m.res.Refuse(element, "%s is not in the node image directory", p)
		return "", false
	}
	if errs := validation.ValidateImagePath(p, nil, dir); len(errs) > 0 {
		m.res.Refuse(element, "%s is not in the node image directory %s: copy it there (virtplane-agent image import) and point the domain at the copy", p, dir)
		return "", false
	}
	rel, err := filepath.Rel(filepath.Clean(dir), p)
	if err != nil {
		m.res.Refuse(element, "%s: %v", p, err)
		return "", false
	}
	return rel, true
}
