package adopt

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// deviceKinds say what each child of <devices> is to a mapping: "" for
// the ones read below (disks, interfaces, serial consoles, channels),
// "-" for the ones the mapping drops silently (what every domain has and
// virtplane gives its own: controllers, input, the balloon, panic, the
// emulator), a note for what the guest loses at its first start through
// virtplane. Anything else is refused, with devicesRefused's reason when
// it has one.
var deviceKinds = map[string]string{
	"disk": "", "interface": "", "serial": "", "console": "", "channel": "", "rng": "",
	"emulator": "-", "controller": "-", "input": "-", "memballoon": "-", "panic": "-", "hub": "-",
	"graphics":    "graphics (VNC, SPICE) are not carried: virtplane guests have a serial console",
	"video":       "the video card is not carried",
	"sound":       "sound cards are not carried",
	"audio":       "audio backends are not carried",
	"redirdev":    "USB redirection is not carried",
	"redirfilter": "USB redirection is not carried",
	"watchdog":    "the watchdog is not carried",
	"parallel":    "parallel ports are not carried",
	"iommu":       "the virtual IOMMU is not carried",
}

var devicesRefused = map[string]string{
	"hostdev":    "a host device passed through: it belongs to this host, and virtplane passes none through",
	"smartcard":  "a smartcard passed through from the host",
	"filesystem": "a host directory shared into the guest: virtplane shares none",
	"shmem":      "shared memory with the host or other guests",
	"tpm":        "a TPM: virtplane has none, and the guest's TPM state (keys, measured boot) would be lost",
	"lease":      "a lock manager lease",
	"memory":     "a memory device (DIMM, NVDIMM, virtio-mem)",
	"nvram":      "a device NVRAM",
	"vsock":      "a vsock device: its context id is host-wide",
	"crypto":     "a crypto device on the host's accelerator",
	"pstore":     "a pstore device backed by a host file",
}

func (m *mapper) devices() {
	for _, n := range m.shape.devices {
		if n.Space != "" {
			m.res.Refuse("devices."+qualified(n), "unknown device")
			continue
		}
		if why, ok := devicesRefused[n.Local]; ok {
			m.res.Refuse("devices."+n.Local, "%s", why)
			continue
		}
		note, ok := deviceKinds[n.Local]
		switch {
		case !ok:
			m.res.Refuse("devices."+n.Local, "unknown device: nothing is adopted that virtplane does not know")
		case note != "" && note != "-":
			m.res.Note("%s", note)
		}
	}
	dev := m.dom.Devices
	if dev == nil {
		return
	}
	for i := range dev.Disks {
		m.disk(i, &dev.Disks[i])
	}
	for i := range dev.Interfaces {
		m.iface(i, &dev.Interfaces[i])
	}
	m.consoles(dev)
}

// diskNameRegexp is the target device names virtplane takes as disk and
// volume names: vda, sdb, hdc (a DNS-1123 label, and a file name).
var diskNameRegexp = regexp.MustCompile(`^[a-z]{1,8}[0-9]{0,4}$`)

// diskChildren are the disk's elements the mapping reads or lets go; a
// note for what the guest loses. Anything else is refused.
var diskChildren = map[string]string{
	"driver": "", "source": "", "target": "", "readonly": "", "serial": "", "boot": "", "alias": "", "address": "",
	"backingStore": "",
	"iotune":       "disk I/O limits (iotune) are not carried", "throttlefilters": "disk I/O limits are not carried",
	"blockio": "the disks' block sizes are not carried", "geometry": "the disks' geometry is not carried",
	"wwn": "disk identities (wwn, vendor, product) are not carried", "vendor": "disk identities (wwn, vendor, product) are not carried",
	"product": "disk identities (wwn, vendor, product) are not carried",
}

var diskChildrenRefused = map[string]string{
	"shareable":  "shared between domains: a volume is one VM's",
	"transient":  "transient: its writes are thrown away, which a volume never does",
	"encryption": "encrypted with a libvirt secret: the key does not come along",
	"auth":       "a network disk's credentials",
	"mirror":     "a block job (copy or mirror) is running on it: wait for it to end",
}

// sourceChildren of a file disk's <source> the mapping lets go; anything
// else (slices, a data store, reservations) changes what the file means.
var sourceChildren = map[string]bool{"seclabel": true}

var diskBuses = map[string]string{"virtio": "virtio", "sata": "sata", "scsi": "scsi", "ide": "sata"}

func (m *mapper) disk(i int, d *libvirtxml.DomainDisk) {
	el := fmt.Sprintf("devices.disk[%d]", i)
	name := ""
	if d.Target != nil {
		name = d.Target.Dev
		el += " (" + name + ")"
	}
	refused := len(m.res.Refusals)
	if i < len(m.shape.disks) {
		for _, c := range m.shape.disks[i] {
			if why, ok := diskChildrenRefused[c]; ok {
				m.res.Refuse(el, "%s", why)
			} else if note, ok := diskChildren[c]; !ok {
				m.res.Refuse(el+"."+c, "unknown disk element")
			} else if note != "" {
				m.res.Note("%s", note)
			}
		}
		for _, c := range m.shape.diskSource[i] {
			if !sourceChildren[c] {
				m.res.Refuse(el+".source."+c, "changes what the file holds for the guest: not carried")
			}
		}
	}
	device := d.Device
	if device == "" {
		device = "disk"
	}
	src := d.Source
	if device == "cdrom" && (src == nil || src.File == nil || src.File.File == "") && (src == nil || src.Block == nil && src.Network == nil && src.Volume == nil) {
		m.res.Note("%s: an empty CD-ROM drive is not carried", el)
		return
	}
	switch {
	case device != "disk" && device != "cdrom":
		m.res.Refuse(el, "a %s: virtplane attaches disks and CD-ROMs", device)
	case src == nil:
		m.res.Refuse(el, "no source")
	case src.Block != nil:
		m.res.Refuse(el, "a host block device (%s): only files are adopted", src.Block.Dev)
	case src.Network != nil:
		m.res.Refuse(el, "a network disk (%s): only files are adopted; for Ceph, make a volume on an rbd storage class and copy the data", src.Network.Protocol)
	case src.Volume != nil:
		m.res.Refuse(el, "a storage pool volume (%s/%s): name its file instead (virsh vol-path) and define the disk as type='file'", src.Volume.Pool, src.Volume.Volume)
	case src.File == nil || src.File.File == "":
		m.res.Refuse(el, "a %s source: only files are adopted", sourceKind(src))
	}
	if d.Target == nil || !diskNameRegexp.MatchString(name) {
		m.res.Refuse(el, "target device %q is not a name such as vda", name)
	}
	bus := ""
	if d.Target != nil {
		var ok bool
		if bus, ok = diskBuses[d.Target.Bus]; !ok {
			m.res.Refuse(el, "bus %q: virtplane attaches disks on virtio, sata and scsi", d.Target.Bus)
		} else if d.Target.Bus != bus {
			m.res.Note("%s: bus %s becomes %s", el, d.Target.Bus, bus)
		}
	}
	format := ""
	if drv := d.Driver; drv != nil {
		format = drv.Type
		if drv.Name != "" && drv.Name != "qemu" {
			m.res.Refuse(el, "driver %q", drv.Name)
		}
	}
	if format != "raw" && format != "qcow2" {
		m.res.Refuse(el, "format %q: virtplane adopts raw and qcow2 files, and reads them as the domain declares (never probed)", format)
	}
	if bs := d.BackingStore; bs != nil && (bs.Format != nil || hasSource(bs.Source)) {
		m.res.Refuse(el, "a qcow2 backing chain: flatten it first (virsh blockpull)")
	}
	if len(m.res.Refusals) > refused {
		return
	}
	p := src.File.File
	if ok := m.adoptablePath(el, p, device == "cdrom"); !ok {
		return
	}
	if device == "cdrom" {
		// A CD-ROM is an image, read-only and shared: one in the image
		// directory is attached as that image; any other is refused by
		// imageName (an ISO is not a volume).
		img, ok := m.imageName(el, p)
		if !ok {
			return
		}
		m.addDisk(&apiv1.Disk{Name: name, Cdrom: &apiv1.CDRomTarget{Bus: bus}, BootOrder: bootOrder(d)},
			&apiv1.Volume{Name: name, Image: &apiv1.ImageVolume{Name: img}})
		return
	}
	m.addDisk(&apiv1.Disk{Name: name, Disk: &apiv1.DiskTarget{Bus: bus, ReadOnly: d.ReadOnly != nil}, BootOrder: bootOrder(d), Serial: d.Serial},
		&apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{}})
	m.res.Disks = append(m.res.Disks, Disk{Name: name, Path: p, Format: format})
}

// adoptablePath checks the lexical rules of a disk file (CheckFile checks
// the file itself): an absolute, clean path inside an allowed directory,
// or, for a CD-ROM, an image in the image directory (which imageName
// checks).
func (m *mapper) adoptablePath(el, p string, cdrom bool) bool {
	switch {
	case !filepath.IsAbs(p) || filepath.Clean(p) != p || strings.ContainsFunc(p, isControl):
		m.res.Refuse(el, "%q is not an absolute, clean path", p)
		return false
	case cdrom:
		return true
	case InDir(m.rules.ImageDir, p):
		m.res.Refuse(el, "%s is in the node image directory, whose images are shared bases no guest writes: copy it out", p)
		return false
	case len(m.rules.Dirs) == 0:
		m.res.Refuse(el, "%s: this node allows adoption from no directory (node agent flag --adopt-dir)", p)
		return false
	case !inAny(m.rules.Dirs, p):
		m.res.Refuse(el, "%s is outside the directories this node allows adoption from (%s)", p, strings.Join(m.rules.Dirs, ", "))
		return false
	}
	return true
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// hasSource reports whether s names anything: libvirt writes an empty
// <backingStore/> for a disk without a backing file.
func hasSource(s *libvirtxml.DomainDiskSource) bool {
	return s != nil && (s.File != nil || s.Block != nil || s.Dir != nil || s.Network != nil || s.Volume != nil ||
		s.NVME != nil || s.VHostUser != nil || s.VHostVDPA != nil)
}

func sourceKind(s *libvirtxml.DomainDiskSource) string {
	switch {
	case s.Dir != nil:
		return "directory"
	case s.NVME != nil:
		return "NVMe"
	case s.VHostUser != nil, s.VHostVDPA != nil:
		return "vhost"
	}
	return "non-file"
}

func bootOrder(d *libvirtxml.DomainDisk) int32 {
	if d.Boot == nil {
		return 0
	}
	return int32(min(d.Boot.Order, 1<<20))
}

func (m *mapper) addDisk(d *apiv1.Disk, v *apiv1.Volume) {
	spec := m.res.Spec
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, d)
	spec.Volumes = append(spec.Volumes, v)
}

var ifaceModels = map[string]string{"virtio": "virtio", "e1000": "e1000", "rtl8139": "rtl8139", "e1000e": "e1000", "": "rtl8139"}

// ifaceChildren are the interface's elements the mapping reads or lets
// go (a note for what the guest loses); anything else is refused.
var ifaceChildren = map[string]string{
	"mac": "", "source": "", "model": "", "alias": "", "address": "", "target": "", "driver": "", "guest": "", "acpi": "",
	"boot":      "network boot (PXE) is not carried",
	"rom":       "NIC option ROMs are not carried",
	"link":      "",
	"mtu":       "interface MTUs are not carried",
	"bandwidth": "interface bandwidth limits are not carried",
	"filterref": "libvirt network filters (nwfilter) are not carried: the guest's traffic is unfiltered",
	"tune":      "interface tuning is not carried", "coalesce": "interface tuning is not carried",
	"port": "isolated ports are not carried",
}

var ifaceChildrenRefused = map[string]string{
	"vlan":        "a VLAN on a libvirt interface (Open vSwitch): virtplane tags Linux bridge ports itself (bridge vlan)",
	"virtualport": "an Open vSwitch or 802.1Qbg port",
	"script":      "a host script run for the interface",
	"downscript":  "a host script run for the interface",
	"backend":     "a network backend (passt, a tap or vhost device) chosen for the interface",
	"ip":          "addresses set on the host side of the interface",
	"route":       "routes set on the host side of the interface",
	"portForward": "passt port forwards: virtplane forwards ports of user networks itself",
	"teaming":     "interface teaming",
}

func (m *mapper) iface(i int, it *libvirtxml.DomainInterface) {
	el := fmt.Sprintf("devices.interface[%d]", i)
	if it.MAC != nil && it.MAC.Address != "" {
		el += " (" + it.MAC.Address + ")"
	}
	refused := len(m.res.Refusals)
	if i < len(m.shape.ifaces) {
		for _, c := range m.shape.ifaces[i] {
			if why, ok := ifaceChildrenRefused[c]; ok {
				m.res.Refuse(el, "%s", why)
			} else if note, ok := ifaceChildren[c]; !ok {
				m.res.Refuse(el+"."+c, "unknown interface element")
			} else if note != "" {
				m.res.Note("%s", note)
			}
		}
	}
	if it.Link != nil && it.Link.State == "down" {
		m.res.Note("%s: its link is down now and comes up at the first start through virtplane", el)
	}
	name := fmt.Sprintf("nic%d", i)
	netw := &apiv1.Network{Name: name}
	src := it.Source
	switch {
	case src == nil:
		m.res.Refuse(el, "no source")
	case src.User != nil:
		netw.User = &apiv1.UserNetwork{}
	case src.Bridge != nil:
		netw.Bridge = &apiv1.BridgeNetwork{Bridge: src.Bridge.Bridge}
	case src.Network != nil:
		netw.Network = &apiv1.LibvirtNetwork{Name: src.Network.Network}
		if src.Network.PortGroup != "" {
			m.res.Note("%s: the port group %q is not carried", el, src.Network.PortGroup)
		}
	case src.Direct != nil:
		m.res.Refuse(el, "macvtap on %s: virtplane attaches to Linux bridges, libvirt networks and user networking", src.Direct.Dev)
	case src.Hostdev != nil:
		m.res.Refuse(el, "a host network device passed through")
	default:
		m.res.Refuse(el, "this kind of interface: virtplane attaches to Linux bridges, libvirt networks and user networking")
	}
	model := ""
	if it.Model != nil {
		model = it.Model.Type
	}
	mapped, ok := ifaceModels[model]
	if !ok {
		m.res.Refuse(el, "model %q: virtplane's NICs are virtio, e1000 and rtl8139", model)
	} else if mapped != model {
		m.res.Note("%s: the NIC model %q becomes %s", el, model, mapped)
	}
	if len(m.res.Refusals) > refused {
		return
	}
	mac := ""
	if it.MAC != nil {
		mac = strings.ToLower(it.MAC.Address)
	} else {
		m.res.Note("%s: it has no MAC address: virtplane gives it one", el)
	}
	spec := m.res.Spec
	spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces, &apiv1.Interface{Name: name, Model: mapped, MacAddress: mac})
	spec.Networks = append(spec.Networks, netw)
}

// consoles notes what the serial console is while the domain is adopted
// and after, and reads the channels.
func (m *mapper) consoles(dev *libvirtxml.DomainDeviceList) {
	for _, s := range dev.Serials {
		if s.Source != nil && s.Source.Pty != nil {
			m.res.SerialPty = true
		} else {
			m.res.Note("a serial port that is not a pty (%s) is not carried", chardevKind(s.Source))
		}
	}
	for _, c := range dev.Consoles {
		if c.Source != nil && c.Source.Pty != nil && (c.Target == nil || c.Target.Type == "" || c.Target.Type == "serial") {
			m.res.SerialPty = true
		}
	}
	if !m.res.SerialPty {
		m.res.Note("the domain has no serial console on a pty: `virtplane-agent console` shows nothing until the first start through virtplane")
	}
	for _, c := range dev.Channels {
		t := c.Target
		if t != nil && t.VirtIO != nil && t.VirtIO.Name == "org.qemu.guest_agent.0" {
			continue // virtplane gives its guests the same channel
		}
		name := chardevKind(c.Source)
		if t != nil && t.VirtIO != nil && t.VirtIO.Name != "" {
			name = t.VirtIO.Name
		}
		m.res.Note("the channel %s is not carried", name)
	}
	for _, r := range dev.RNGs {
		if b := r.Backend; b == nil || b.Random == nil {
			m.res.Note("the random number generator's backend is not carried")
		}
	}
}

func chardevKind(s *libvirtxml.DomainChardevSource) string {
	switch {
	case s == nil:
		return "without a source"
	case s.File != nil:
		return "to a file"
	case s.TCP != nil, s.UDP != nil:
		return "on a network socket"
	case s.UNIX != nil:
		return "on a unix socket"
	case s.Dev != nil:
		return "on a host device"
	case s.SpiceVMC != nil, s.SpicePort != nil, s.QEMUVDAgent != nil:
		return "for SPICE"
	}
	return "of another kind"
}
