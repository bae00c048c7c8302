package domxml

import (
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// userAlias is libvirt's rule for user-chosen device aliases. Aliases let
// the node agent map libvirt devices back to VMI disk and interface names.
var userAlias = regexp.MustCompile(`^ua-[a-zA-Z0-9_-]+$`)

func alias(kind, name string) *libvirtxml.DomainAlias {
	a := "ua-" + kind + "-" + name
	if !userAlias.MatchString(a) {
		return nil
	}
	return &libvirtxml.DomainAlias{Name: a}
}

// DiskAlias is the alias of the VMI's disk name in the domain, as
// libvirt keeps it in the live XML; "" for a name that makes no valid
// alias (then the disk has none).
func DiskAlias(name string) string {
	if a := alias("disk", name); a != nil {
		return a.Name
	}
	return ""
}

// DiskName is the VMI's disk name a disk alias (DiskAlias's) stands for;
// ok is false for an alias that is no VMI disk's.
func DiskName(alias string) (name string, ok bool) {
	name, ok = strings.CutPrefix(alias, "ua-disk-")
	return name, ok && name != ""
}

// DiskTarget is a disk's target device (vdb), for messages.
func DiskTarget(d libvirtxml.DomainDisk) string {
	if d.Target == nil {
		return "no target"
	}
	return d.Target.Dev
}

func buildDevices(vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (*libvirtxml.DomainDeviceList, error) {
	zero := uint(0)
	d := &libvirtxml.DomainDeviceList{
		// q35 would otherwise get a qemu-xhci controller nobody uses.
		Controllers: []libvirtxml.DomainController{{Type: "usb", Index: &zero, Model: "none"}},
		// No balloon: guest memory is fixed, and the balloon's stats
		// polling costs QEMU time for nothing.
		MemBalloon: &libvirtxml.DomainMemBalloon{Model: "none"},
		// pvpanic: a guest kernel panic becomes a libvirt Crashed event
		// instead of a guest that hangs on its panic screen.
		Panics: []libvirtxml.DomainPanic{{Model: "isa"}},
	}

	disks, scsi, err := buildDisks(opts.GetDisks())
	if err != nil {
		return nil, err
	}
	defaultBootDisk(disks, opts.GetKernelPath() != "")
	d.Disks = disks
	if scsi {
		d.Controllers = append(d.Controllers, libvirtxml.DomainController{Type: "scsi", Index: &zero, Model: "virtio-scsi"})
	}

	nics, err := buildInterfaces(vmi.GetMetadata().GetUid(), vmi.GetSpec())
	if err != nil {
		return nil, err
	}
	d.Interfaces = nics
	d.Channels = []libvirtxml.DomainChannel{guestAgentChannel()}

	serial, console := buildConsole(opts.GetConsoleLogPath())
	d.Serials = []libvirtxml.DomainSerial{serial}
	d.Consoles = []libvirtxml.DomainConsole{console}
	return d, nil
}

// buildConsole gives the guest one serial port as a pty whose output
// virtlogd also appends to the console log. A pty keeps an interactive
// console possible (virsh console), which type='file' would not; the log
// is written by virtlogd as root, so the node agent can read it, and it
// is rotated by virtlogd (max_size in virtlogd.conf) instead of growing
// without bound.
func buildConsole(logPath string) (libvirtxml.DomainSerial, libvirtxml.DomainConsole) {
	port := uint(0)
	var log *libvirtxml.DomainChardevLog
	if logPath != "" {
		log = &libvirtxml.DomainChardevLog{File: logPath, Append: "on"}
	}
	serial := libvirtxml.DomainSerial{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainSerialTarget{Port: &port},
		Log:    log,
	}
	consolePort := uint(0)
	console := libvirtxml.DomainConsole{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Target: &libvirtxml.DomainConsoleTarget{Type: "serial", Port: &consolePort},
	}
	return serial, console
}

// buildDisks returns the disks and whether a virtio-scsi controller is
// needed. Target names are assigned in order per prefix: virtio disks get
// vda, vdb…; SATA and SCSI share the sd namespace in the guest, so they
// share one counter.
func buildDisks(srcs []*launcherpb.DiskSource) ([]libvirtxml.DomainDisk, bool, error) {
	var (
		out     []libvirtxml.DomainDisk
		scsi    bool
		counter = map[string]int{}
	)
	for _, s := range srcs {
		disk, prefix, err := buildDisk(s)
		if err != nil {
			return nil, false, err
		}
		disk.Target.Dev = prefix + diskSuffix(counter[prefix])
		counter[prefix]++
		scsi = scsi || disk.Target.Bus == apiv1.DiskBusSCSI
		out = append(out, disk)
	}
	return out, scsi, nil
}

// buildDisk is one disk without its target name, and the prefix of the
// target names of its bus (vd, sd).
func buildDisk(s *launcherpb.DiskSource) (libvirtxml.DomainDisk, string, error) {
	device := s.GetDevice()
	if device == "" {
		device = "disk"
	}
	bus := s.GetBus()
	switch device {
	case "disk":
		if bus == "" {
			bus = apiv1.DefaultDiskBus
		}
	case "cdrom":
		if bus == "" {
			bus = apiv1.DefaultCDRomBus
		}
		if !slices.Contains(apiv1.CDRomBuses(), bus) {
			return libvirtxml.DomainDisk{}, "", fmt.Errorf("disk %q: a cdrom cannot use the %s bus", s.GetName(), bus)
		}
	default:
		return libvirtxml.DomainDisk{}, "", fmt.Errorf("disk %q: unknown device %q (disk or cdrom)", s.GetName(), device)
	}
	var prefix string
	switch bus {
	case apiv1.DiskBusVirtio:
		prefix = "vd"
	case apiv1.DiskBusSATA, apiv1.DiskBusSCSI:
		prefix = "sd"
	default:
		return libvirtxml.DomainDisk{}, "", fmt.Errorf("disk %q: unknown bus %q (virtio, sata or scsi)", s.GetName(), bus)
	}
	format := s.GetFormat()
	if format == "" {
		format = "raw"
	}
	if format != "raw" && format != "qcow2" {
		return libvirtxml.DomainDisk{}, "", fmt.Errorf("disk %q: unknown format %q (raw or qcow2)", s.GetName(), format)
	}
	source, driver, err := diskSource(s, format)
	if err != nil {
		return libvirtxml.DomainDisk{}, "", err
	}
	disk := libvirtxml.DomainDisk{
		Device: device,
		Driver: driver,
		Source: source,
		Target: &libvirtxml.DomainDiskTarget{Bus: bus},
		Serial: diskSerial(s),
		Alias:  alias("disk", s.GetName()),
	}
	if device == "cdrom" || s.GetReadOnly() {
		disk.ReadOnly = &libvirtxml.DomainDiskReadOnly{}
	}
	if o := s.GetBootOrder(); o > 0 {
		disk.Boot = &libvirtxml.DomainDeviceBoot{Order: uint(o)}
	}
	return disk, prefix, nil
}

// diskSource is where a disk's data is, and how QEMU opens it: a file
// (shared ones uncached, so that a migration's destination reads what the
// source wrote: libvirt's rule for shared storage), or an image on a Ceph
// pool that QEMU opens itself, authenticated by the libvirt secret the
// launcher defined from SyncOptions.ceph_secrets.
func diskSource(s *launcherpb.DiskSource, format string) (*libvirtxml.DomainDiskSource, *libvirtxml.DomainDiskDriver, error) {
	driver := &libvirtxml.DomainDiskDriver{Name: "qemu", Type: format}
	if r := s.GetRbd(); r != nil {
		if format != "raw" {
			return nil, nil, fmt.Errorf("disk %q: an rbd disk is raw, not %s", s.GetName(), format)
		}
		net, err := rbdNetwork(r)
		if err != nil {
			return nil, nil, fmt.Errorf("disk %q: %w", s.GetName(), err)
		}
		if f := r.GetConfigFile(); f != "" {
			// Read by QEMU: bounded waits for monitors (package ceph's
			// QEMUConf).
			if !filepath.IsAbs(f) || filepath.Clean(f) != f {
				return nil, nil, fmt.Errorf("disk %q: ceph config file %q is not a clean absolute path", s.GetName(), f)
			}
			net.Config = &libvirtxml.DomainDiskSourceNetworkConfig{File: f}
		}
		// librbd's cache is coherent across a migration (QEMU flushes it
		// when the source lets go), and writeback is what it is built for.
		driver.Cache = "writeback"
		return &libvirtxml.DomainDiskSource{Network: net}, driver, nil
	}
	if !filepath.IsAbs(s.GetPath()) {
		return nil, nil, fmt.Errorf("disk %q: path %q is not absolute", s.GetName(), s.GetPath())
	}
	if s.GetShared() {
		driver.Cache = "none"
	}
	return &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: s.GetPath()}}, driver, nil
}

// diskSuffix maps 0→a, 25→z, 26→aa like the Linux sd/vd naming.
func diskSuffix(i int) string {
	s := ""
	for i++; i > 0; i = (i - 1) / 26 {
		s = string(rune('a'+(i-1)%26)) + s
	}
	return s
}

// rbdNetwork is an image on a Ceph pool as QEMU opens it: the class's
// monitors, pool/image, and the user whose key is the libvirt secret of
// that usage (SyncOptions.ceph_secrets).
func rbdNetwork(r *launcherpb.RBDDisk) (*libvirtxml.DomainDiskSourceNetwork, error) {
	if r.GetPool() == "" || r.GetImage() == "" || r.GetUser() == "" || r.GetSecretUsage() == "" || len(r.GetMonitors()) == 0 {
		return nil, errors.New("an rbd image needs monitors, pool, image, user and secret")
	}
	net := &libvirtxml.DomainDiskSourceNetwork{
		Protocol: "rbd",
		Name:     r.GetPool() + "/" + r.GetImage(),
		Auth: &libvirtxml.DomainDiskAuth{Username: r.GetUser(),
			Secret: &libvirtxml.DomainDiskSecret{Type: "ceph", Usage: r.GetSecretUsage()}},
	}
	for _, m := range r.GetMonitors() {
		ap, err := netip.ParseAddrPort(m)
		if err != nil {
			return nil, fmt.Errorf("monitor %q: %w", m, err)
		}
		net.Hosts = append(net.Hosts, libvirtxml.DomainDiskSourceHost{Name: ap.Addr().String(), Port: strconv.Itoa(int(ap.Port()))})
	}
	return net, nil
}
