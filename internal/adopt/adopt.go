// Package adopt maps a libvirt domain that virtplane did not define to a
// VM spec, and says, element by element, what it cannot map
// (docs/adopt.md). It is pure: the domain XML and the node's rules in,
// the spec, the refusals and the notes out; files are checked by the
// node agent (CheckFile) and sizes filled in afterwards (SetSize).
//
// Everything is an allow-list. The domain's elements are read twice: as
// tokens, so that an element this package does not know (a new libvirt
// device, a qemu:commandline, anything libvirtxml would silently drop)
// is a refusal naming it; and through libvirtxml for the ones it knows.
package adopt

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Rules are what the node allows an adopted domain to use.
type Rules struct {
	// Dirs are the directories whose files may become a VM's volumes
	// (the node's --adopt-dir): absolute and clean. None refuses every
	// disk.
	Dirs []string
	// ImageDir is the node image directory: a kernel, an initrd or a
	// CD-ROM image in it maps to its image name.
	ImageDir string
}

// Disk is a file disk of the domain that becomes a persistent volume.
type Disk struct {
	// Name of the volume and disk in the spec (the domain's target
	// device, vda).
	Name string
	// Path is the file as the domain XML names it; the node checks it
	// (CheckFile) before anything reads it.
	Path string
	// Format is raw or qcow2, as the domain declares it: the file is
	// always opened with it, never probed.
	Format string
}

// Result is what a domain maps to.
type Result struct {
	// Spec is the VM template's instance spec. Persistent volumes have
	// no size until SetSize.
	Spec *apiv1.VirtualMachineInstanceSpec
	// Refusals are what cannot be mapped; any one refuses the adoption.
	Refusals []*apiv1.AdoptionRefusal
	// Notes are what the first start through virtplane drops or changes.
	Notes []string
	// Disks are the file disks that become persistent volumes, in the
	// spec's order.
	Disks []Disk
	// NVRAM is the EFI variable store's file, "" when there is none.
	NVRAM string
	// SerialPty says the domain has a serial console on a pty (which the
	// launcher copies into the console log while the domain is adopted).
	SerialPty bool
}

// Refuse adds a refusal of element.
func (r *Result) Refuse(element, format string, args ...any) {
	r.Refusals = append(r.Refusals, &apiv1.AdoptionRefusal{Element: element, Reason: fmt.Sprintf(format, args...)})
}

// Note adds a note.
func (r *Result) Note(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(r.Notes, n) {
		r.Notes = append(r.Notes, n)
	}
}

// SetSize gives the persistent volume of disk name its size, bytes as a
// quantity (the file's virtual size: the volume copied from it is as
// large).
func (r *Result) SetSize(name string, bytes int64) {
	for _, v := range r.Spec.GetVolumes() {
		if v.GetName() == name && v.GetPersistent() != nil {
			v.Persistent.Size = resource.NewQuantity(bytes, resource.BinarySI).String()
		}
	}
}

// maxDomainXML bounds the XML read: a domain's definition is a few
// kilobytes; anything near this is not one to adopt.
const maxDomainXML = 1 << 20

// ErrNotADomain is an XML document that is not a libvirt domain.
var ErrNotADomain = errors.New("not a libvirt domain definition")

// Map maps domainXML (libvirt's XML of the domain, the live one when it
// runs) under rules. The error is for XML that is not a domain at all;
// everything else is a refusal in the Result.
func Map(domainXML string, rules Rules) (*Result, error) {
	if len(domainXML) > maxDomainXML {
		return nil, fmt.Errorf("%w: %d bytes of XML", ErrNotADomain, len(domainXML))
	}
	shape, err := scan(domainXML)
	if err != nil {
		return nil, err
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(domainXML); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotADomain, err)
	}
	m := &mapper{rules: rules, dom: &d, shape: shape, res: &Result{Spec: &apiv1.VirtualMachineInstanceSpec{
		Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{}},
	}}}
	m.topLevel()
	m.machine()
	m.devices()
	return m.res, nil
}

// mapper is one Map.
type mapper struct {
	rules Rules
	dom   *libvirtxml.Domain
	shape *shape
	res   *Result
}

// shape is the element names of the parts of the domain that are read by
// allow-list: the domain's children, the children of <devices>, and the
// children of each disk, disk source and interface (in document order).
type shape struct {
	top        []xml.Name
	devices    []xml.Name
	disks      [][]string // per <disk>: its children's names
	diskSource [][]string // per <disk>: its <source>'s children's names
	ifaces     [][]string // per <interface>: its children's names
}

// scan reads the element names of shape. The XML must be one <domain>
// element in no namespace.
func scan(domainXML string) (*shape, error) {
	dec := xml.NewDecoder(strings.NewReader(domainXML))
	s := &shape{}
	var stack []string // local names from the root
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrNotADomain, err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth := len(stack)
			path := strings.Join(stack, "/")
			switch {
			case depth == 0 && (t.Name.Local != "domain" || t.Name.Space != ""):
				return nil, fmt.Errorf("%w: the root element is <%s>", ErrNotADomain, t.Name.Local)
			case depth == 1:
				s.top = append(s.top, t.Name)
			case depth == 2 && path == "domain/devices":
				s.devices = append(s.devices, t.Name)
				switch t.Name.Local {
				case "disk":
					s.disks = append(s.disks, nil)
					s.diskSource = append(s.diskSource, nil)
				case "interface":
					s.ifaces = append(s.ifaces, nil)
				}
			case depth == 3 && path == "domain/devices/disk" && len(s.disks) > 0:
				s.disks[len(s.disks)-1] = append(s.disks[len(s.disks)-1], qualified(t.Name))
			case depth == 4 && path == "domain/devices/disk/source" && len(s.diskSource) > 0:
				s.diskSource[len(s.diskSource)-1] = append(s.diskSource[len(s.diskSource)-1], qualified(t.Name))
			case depth == 3 && path == "domain/devices/interface" && len(s.ifaces) > 0:
				s.ifaces[len(s.ifaces)-1] = append(s.ifaces[len(s.ifaces)-1], qualified(t.Name))
			}
			stack = append(stack, t.Name.Local)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	if len(s.top) == 0 && len(stack) == 0 && !strings.Contains(domainXML, "<domain") {
		return nil, fmt.Errorf("%w: no <domain> element", ErrNotADomain)
	}
	return s, nil
}

// qualified is the name as a refusal shows it: "qemu:commandline" for an
// element in a namespace (by its URI's last element), else the local
// name.
func qualified(n xml.Name) string {
	if n.Space == "" {
		return n.Local
	}
	ns := n.Space
	if i := strings.LastIndexAny(strings.TrimRight(ns, "/"), "/:"); i >= 0 {
		ns = strings.TrimRight(ns, "/")[i+1:]
	}
	return "{" + ns + "}" + n.Local
}

// What the domain's own elements are to a mapping: read (mapped or
// checked by the code below), dropped with a note, or ignored because
// the mapping already says all there is (identity, tuning virtplane sets
// itself). Anything else is refused.
var topLevel = map[string]string{
	"name": "", "uuid": "", "title": "", "description": "", "metadata": "",
	"memory": "", "currentMemory": "", "vcpu": "", "os": "", "features": "", "cpu": "",
	"clock": "", "on_poweroff": "", "on_reboot": "", "on_crash": "", "devices": "",
	"seclabel": "", "pm": "", "resource": "", "genid": "",
	// Dropped: host tuning, which virtplane decides itself.
	"blkiotune": "block I/O tuning (blkiotune) is not carried", "memtune": "memory tuning (memtune) is not carried",
	"memoryBacking": "memory backing (hugepages, locking, sharing) is not carried",
	"iothreads":     "I/O threads are not carried", "iothreadids": "I/O threads are not carried",
	"defaultiothread": "I/O threads are not carried",
	"cputune":         "CPU tuning and pinning (cputune) are not carried", "numatune": "NUMA tuning is not carried",
	"vcpus": "per-vCPU settings (vcpus) are not carried", "perf": "perf events are not carried",
	"sysinfo":        "SMBIOS strings (sysinfo) are not carried: a guest that identifies its machine by them sees others",
	"maxMemory":      "memory hotplug slots (maxMemory) are not carried",
	"keywrap":        "key wrapping (keywrap) is not carried",
	"on_lockfailure": "",
}

var topLevelRefused = map[string]string{
	"idmap":           "user namespace id maps are for containers, not VMs",
	"launchSecurity":  "memory encryption (SEV, TDX, PV) cannot be carried: the guest would run unprotected",
	"bootloader":      "a host-side boot loader (Xen's pygrub) is not a QEMU domain's",
	"bootloader_args": "a host-side boot loader (Xen's pygrub) is not a QEMU domain's",
	"throttlegroups":  "I/O throttle groups are not carried",
}

func (m *mapper) topLevel() {
	d := m.dom
	switch d.Type {
	case "kvm", "qemu":
	default:
		m.res.Refuse("type", "a %q domain: only QEMU domains (kvm, qemu) can be adopted", d.Type)
	}
	for _, n := range m.shape.top {
		if n.Space != "" {
			m.res.Refuse(qualified(n), "hypervisor-specific settings (arbitrary QEMU arguments, capabilities, overrides) are never adopted: they could do anything to the host")
			continue
		}
		if why, ok := topLevelRefused[n.Local]; ok {
			m.res.Refuse(n.Local, "%s", why)
			continue
		}
		note, ok := topLevel[n.Local]
		if !ok {
			m.res.Refuse(n.Local, "unknown element: nothing is adopted that virtplane does not know")
			continue
		}
		if note != "" {
			m.res.Note("%s", note)
		}
	}
	if d.Clock != nil && d.Clock.Offset != "" && d.Clock.Offset != "utc" {
		m.res.Note("the clock offset %q becomes utc", d.Clock.Offset)
	}
	for _, a := range []struct{ what, got, want string }{
		{"on_poweroff", d.OnPoweroff, "destroy"}, {"on_reboot", d.OnReboot, "restart"}, {"on_crash", d.OnCrash, "destroy"},
	} {
		if a.got != "" && a.got != a.want {
			m.res.Note("%s %q becomes %q (the run strategy decides what follows)", a.what, a.got, a.want)
		}
	}
	if f := d.Features; f != nil && f.HyperV != nil {
		m.res.Note("Hyper-V enlightenments are not carried")
	}
}
