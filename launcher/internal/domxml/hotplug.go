package domxml

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// Hotplug of disks into a running domain (docs/hotplug.md): the disk
// plugged in, the room the domain keeps for it, and what a live
// migration's destination takes over from the source so that a domain
// whose devices were plugged after it started still matches.

// HotplugPorts is how many PCIe root ports a domain keeps free for
// devices plugged in while it runs: on q35 every PCIe device (a virtio
// disk, a virtio-scsi controller) needs a root port of its own, and
// libvirt defines only the ports the domain's devices take. KubeVirt
// keeps free ports the same way (appendPCIeRootPortControllers). So a
// running guest takes up to this many virtio disks beyond those it
// started with; scsi disks share one controller, which takes one port.
const HotplugPorts = 4

// maxSerial is what a virtio-blk serial holds (VIRTIO_BLK_ID_BYTES) and
// validation allows.
const maxSerial = 20

// diskSerial is the serial the guest sees: the spec's, or for a
// hotpluggable disk without one, its name (clipped to what a serial
// holds), so that the guest finds a plugged disk by name
// (/dev/disk/by-id/virtio-<name>) whatever target it got.
func diskSerial(s *launcherpb.DiskSource) string {
	if s.GetSerial() != "" || !s.GetHotpluggable() {
		return s.GetSerial()
	}
	return s.GetName()[:min(len(s.GetName()), maxSerial)]
}

// HotplugDisk is the disk src as it is plugged into the running domain
// whose live XML is live: the first target name of its bus's prefix that
// none of the domain's disks has (a disk unplugged earlier may have left
// a gap; the names are libvirt's, not the guest's). needSCSI says the
// domain has no SCSI controller yet, which a scsi disk needs plugged
// first (SCSIController).
func HotplugDisk(src *launcherpb.DiskSource, live string) (disk libvirtxml.DomainDisk, needSCSI bool, err error) {
	var def libvirtxml.Domain
	if err := def.Unmarshal(live); err != nil {
		return disk, false, fmt.Errorf("parse the domain XML: %w", err)
	}
	if src.GetDevice() != "" && src.GetDevice() != "disk" {
		return disk, false, fmt.Errorf("disk %q: only a disk is plugged, not a %s", src.GetName(), src.GetDevice())
	}
	disk, prefix, err := buildDisk(src)
	if err != nil {
		return disk, false, err
	}
	if disk.Boot != nil {
		return disk, false, fmt.Errorf("disk %q: a plugged disk cannot have a boot order", src.GetName())
	}
	used := map[string]bool{}
	scsi := false
	if def.Devices != nil {
		for _, d := range def.Devices.Disks {
			if d.Target != nil {
				used[d.Target.Dev] = true
			}
		}
		for _, c := range def.Devices.Controllers {
			scsi = scsi || c.Type == "scsi"
		}
	}
	for i := 0; ; i++ {
		if dev := prefix + diskSuffix(i); !used[dev] {
			disk.Target.Dev = dev
			break
		}
	}
	return disk, disk.Target.Bus == apiv1.DiskBusSCSI && !scsi, nil
}

// SCSIController is the virtio-scsi controller scsi disks are on, as
// buildDevices defines it.
func SCSIController() libvirtxml.DomainController {
	zero := uint(0)
	return libvirtxml.DomainController{Type: "scsi", Index: &zero, Model: "virtio-scsi"}
}

// WithHotplugPorts returns the defined domain def (libvirt's XML, its
// addresses assigned) with pcie-root-port controllers added so that want
// of them are free (no device's address is on them), and how many it
// added. libvirt numbers and places the new ports when the XML is
// defined again; the devices keep their addresses, which the XML now
// states. A domain that is not q35's PCIe (no pcie-root) is returned as
// it came.
func WithHotplugPorts(def string, want int) (string, int, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(def); err != nil {
		return "", 0, fmt.Errorf("parse the domain XML: %w", err)
	}
	if d.Devices == nil {
		return def, 0, nil
	}
	used, err := pciBuses(def)
	if err != nil {
		return "", 0, err
	}
	pcie, free := false, 0
	for _, c := range d.Devices.Controllers {
		if c.Type != "pci" {
			continue
		}
		pcie = pcie || c.Model == "pcie-root"
		// A port without an index is not placed yet: nothing is on it.
		if c.Model == "pcie-root-port" && (c.Index == nil || !used[*c.Index]) {
			free++
		}
	}
	if !pcie || free >= want {
		return def, 0, nil
	}
	add := want - free
	for range add {
		d.Devices.Controllers = append(d.Devices.Controllers, libvirtxml.DomainController{Type: "pci", Model: "pcie-root-port"})
	}
	out, err := d.Marshal()
	if err != nil {
		return "", 0, fmt.Errorf("marshal the domain XML: %w", err)
	}
	return out, add, nil
}

// pciBuses are the PCI buses the devices of domain XML x sit on (each
// <address type='pci' bus='…'>): a root port with a device on it is the
// bus of that index.
func pciBuses(x string) (map[uint]bool, error) {
	used := map[uint]bool{}
	dec := xml.NewDecoder(strings.NewReader(x))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return used, nil
		}
		if err != nil {
			return nil, fmt.Errorf("parse the domain XML: %w", err)
		}
		se, ok := tok.(xml.StartElement)
		if !ok || se.Name.Local != "address" {
			continue
		}
		var typ, bus string
		for _, a := range se.Attr {
			switch a.Name.Local {
			case "type":
				typ = a.Value
			case "bus":
				bus = a.Value
			}
		}
		if typ != "pci" || bus == "" {
			continue
		}
		n, err := strconv.ParseUint(bus, 0, 32)
		if err != nil {
			return nil, fmt.Errorf("PCI address bus %q: %w", bus, err)
		}
		used[uint(n)] = true
	}
}

// alignDevices makes the destination d of a live migration lay out its
// devices as the running source s has them: libvirt checks that the two
// match (the same disks in the same order with the same targets, every
// device at the same address), and a source that had disks plugged in or
// unplugged while it ran no longer matches a domain defined afresh from
// its spec. So d takes s's controllers (no host paths in them; only
// libvirt's own aliases dropped), its disks are put in s's order with
// s's targets and addresses (matched by their user aliases, ua-disk-*),
// and its interfaces take s's addresses. It reports whether d changed.
// A disk only one of them has is an error: a hotplug under way that the
// migration would lose or invent.
func alignDevices(d, s *libvirtxml.Domain) (bool, error) {
	if d.Devices == nil || s.Devices == nil {
		return false, nil
	}
	// Compared without libvirt's own aliases, which a live XML has and
	// an inactive one not: they are no difference to libvirt.
	was := *d.Devices
	was.Controllers = withoutLibvirtAliases(d.Devices.Controllers)
	before, err := marshalDevices(&was)
	if err != nil {
		return false, err
	}
	d.Devices.Controllers = withoutLibvirtAliases(s.Devices.Controllers)
	if err := alignDisks(d.Devices, s.Devices); err != nil {
		return false, err
	}
	addrs := map[string]*libvirtxml.DomainAddress{}
	for _, i := range s.Devices.Interfaces {
		if i.Alias != nil && userAlias.MatchString(i.Alias.Name) {
			addrs[i.Alias.Name] = i.Address
		}
	}
	for k, i := range d.Devices.Interfaces {
		if i.Alias == nil {
			continue
		}
		if a, ok := addrs[i.Alias.Name]; ok {
			d.Devices.Interfaces[k].Address = a
		}
	}
	after, err := marshalDevices(d.Devices)
	if err != nil {
		return false, err
	}
	return before != after, nil
}

// alignDisks puts d's disks in s's order with s's targets and addresses,
// matching them by user alias. Disks without one (not virtplane's) are
// left as they are.
func alignDisks(d, s *libvirtxml.DomainDeviceList) error {
	byAlias := map[string]libvirtxml.DomainDisk{}
	for _, disk := range d.Disks {
		if disk.Alias == nil || !userAlias.MatchString(disk.Alias.Name) {
			return nil
		}
		byAlias[disk.Alias.Name] = disk
	}
	out := make([]libvirtxml.DomainDisk, 0, len(d.Disks))
	for _, src := range s.Disks {
		if src.Alias == nil || !userAlias.MatchString(src.Alias.Name) {
			return nil
		}
		disk, ok := byAlias[src.Alias.Name]
		if !ok {
			return fmt.Errorf("the source has disk %s (%s) that the destination does not: a disk is being plugged or "+
				"unplugged; migrate once it is done", diskNameOf(src.Alias.Name), DiskTarget(src))
		}
		delete(byAlias, src.Alias.Name)
		if disk.Target != nil && src.Target != nil {
			t := *disk.Target
			t.Dev = src.Target.Dev
			disk.Target = &t
		}
		disk.Address = src.Address
		out = append(out, disk)
	}
	for a := range byAlias {
		return fmt.Errorf("the destination has disk %s that the source does not: a disk is being plugged or unplugged; "+
			"migrate once it is done", diskNameOf(a))
	}
	d.Disks = out
	return nil
}

// diskNameOf is the disk name of a user alias, for messages: the alias
// itself when it is no disk's.
func diskNameOf(alias string) string {
	if name, ok := DiskName(alias); ok {
		return name
	}
	return alias
}

// withoutLibvirtAliases is a copy of cs with only user aliases kept.
func withoutLibvirtAliases(cs []libvirtxml.DomainController) []libvirtxml.DomainController {
	out := make([]libvirtxml.DomainController, 0, len(cs))
	for _, c := range cs {
		c.Alias = userAliasOnly(c.Alias)
		out = append(out, c)
	}
	return out
}

// userAliasOnly keeps an alias the user (virtplane) chose; libvirt's own
// (pci.1, scsi0) are libvirt's to give.
func userAliasOnly(a *libvirtxml.DomainAlias) *libvirtxml.DomainAlias {
	if a == nil || !userAlias.MatchString(a.Name) {
		return nil
	}
	return a
}

func marshalDevices(l *libvirtxml.DomainDeviceList) (string, error) {
	b, err := xml.Marshal(l)
	if err != nil {
		return "", fmt.Errorf("marshal the devices: %w", err)
	}
	return string(b), nil
}
