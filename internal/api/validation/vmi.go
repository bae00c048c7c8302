package validation

import (
	"fmt"
	"net"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const (
	// MaxDevices bounds each of a spec's lists (disks, volumes,
	// interfaces, networks): a guest's PCI bus and libvirt's domain XML
	// grow with them, and no VM here needs more.
	MaxDevices       = 64
	maxVCPUs         = 512
	maxCloudInitData = 64 * 1024
	maxKernelCmdline = 4096
	maxDiskSerialLen = 20 // virtio-blk and ATA serials hold 20 bytes
)

var diskSerialRegexp = regexp.MustCompile(`^[A-Za-z0-9_.+-]+$`)

// ValidateVirtualMachineInstanceSpec checks an instance spec (also a VM's
// template spec). Zero values of optional fields are accepted as "use the
// default", so the spec is valid before and after defaulting alike.
func ValidateVirtualMachineInstanceSpec(spec *apiv1.VirtualMachineInstanceSpec, path *field.Path, opts Options) field.ErrorList {
	if spec == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	if errs := validateDeviceCounts(spec, path); len(errs) > 0 {
		// The lists refer to each other by name: checking their elements
		// would bury this in errors, and cost work for nothing.
		return errs
	}
	var errs field.ErrorList
	// Volumes and networks are checked first because disks and interfaces
	// refer to them; their errors are reported in field order below.
	volumes := validateVolumes(spec.GetVolumes(), path.Child("volumes"), opts)
	networks := validateNetworks(spec.GetNetworks(), path.Child("networks"))

	domainPath := path.Child("domain")
	if domain := spec.GetDomain(); domain == nil {
		errs = append(errs, field.Required(domainPath, ""))
	} else {
		errs = append(errs, validateCPU(domain.GetCpu(), domainPath.Child("cpu"))...)
		errs = append(errs, validateGuestMemory(domain.GetMemory().GetGuest(), domainPath.Child("memory", "guest"))...)
		devicesPath := domainPath.Child("devices")
		used := map[string]bool{}
		errs = append(errs, validateDisks(domain.GetDevices().GetDisks(), devicesPath.Child("disks"), volumes.names, used)...)
		errs = append(errs, validateHotplug(spec, path)...)
		errs = append(errs, validateInterfaces(domain.GetDevices().GetInterfaces(), devicesPath.Child("interfaces"), networks.names)...)
		errs = append(errs, validateFirmware(domain.GetFirmware(), domainPath.Child("firmware"), opts)...)
		// KubeVirt's rule: a volume only reaches the guest through a disk of
		// the same name, so one without a disk is a mistake.
		for i, v := range spec.GetVolumes() {
			if n := v.GetName(); n != "" && volumes.names[n] == i && !used[n] {
				volumes.errs = append(volumes.errs, field.Invalid(path.Child("volumes").Index(i).Child("name"), n, "volume is not used by any disk; add a disk with the same name"))
			}
		}
	}
	errs = append(errs, volumes.errs...)
	errs = append(errs, networks.errs...)
	if opts.HostPolicy != nil && len(networks.errs) == 0 {
		// On networks as they are meant: a malformed forward is
		// reported once, by validateNetworks.
		errs = append(errs, opts.HostPolicy.Check(spec, path)...)
	}

	errs = append(errs, validateLabels(spec.GetNodeSelector(), path.Child("node_selector"))...)
	if g := spec.TerminationGracePeriodSeconds; g != nil {
		errs = append(errs, ValidateGracePeriod(*g, path.Child("termination_grace_period_seconds"))...)
	}
	if s := spec.GetEvictionStrategy(); s != "" {
		errs = append(errs, oneOf(s, path.Child("eviction_strategy"), apiv1.EvictionStrategies())...)
	}
	return errs
}

// MaxGracePeriodSeconds bounds a termination grace period: a year is
// longer than any guest takes to shut down, and node agents count the
// period in time.Duration, which overflows past 292 years (a period that
// wraps around to a negative one would kill the guest at once).
const MaxGracePeriodSeconds = 365 * 24 * 3600

// ValidateGracePeriod checks a grace period in seconds (a spec's, or a
// stop or restart request's): 0 to MaxGracePeriodSeconds.
func ValidateGracePeriod(g int64, path *field.Path) field.ErrorList {
	switch {
	case g < 0:
		return field.ErrorList{field.Invalid(path, g, "must be greater than or equal to 0")}
	case g > MaxGracePeriodSeconds:
		return field.ErrorList{field.Invalid(path, g, fmt.Sprintf("must be at most %d (a year)", MaxGracePeriodSeconds))}
	}
	return nil
}

// validateDeviceCounts bounds the spec's lists (MaxDevices).
func validateDeviceCounts(spec *apiv1.VirtualMachineInstanceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	devices := path.Child("domain", "devices")
	for _, l := range []struct {
		path *field.Path
		n    int
	}{
		{devices.Child("disks"), len(spec.GetDomain().GetDevices().GetDisks())},
		{devices.Child("interfaces"), len(spec.GetDomain().GetDevices().GetInterfaces())},
		{path.Child("volumes"), len(spec.GetVolumes())},
		{path.Child("networks"), len(spec.GetNetworks())},
	} {
		if l.n > MaxDevices {
			errs = append(errs, field.TooMany(l.path, l.n, MaxDevices))
		}
	}
	forwards := 0
	for i, n := range spec.GetNetworks() {
		if forwards += len(n.GetUser().GetPortForwards()); forwards > MaxPortForwards {
			e := field.TooMany(path.Child("networks").Index(i).Child("user", "port_forwards"), forwards, MaxPortForwards)
			e.Detail = fmt.Sprintf("an instance may have at most %d port forwards, all its networks together", MaxPortForwards)
			return append(errs, e)
		}
	}
	return errs
}

// oneOf reports v unless it is one of allowed.
func oneOf(v string, path *field.Path, allowed []string) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, v, allowed)}
}

func validateCPU(cpu *apiv1.CPU, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	product := int64(1)
	for _, c := range []struct {
		name string
		n    int32
	}{{"cores", cpu.GetCores()}, {"sockets", cpu.GetSockets()}, {"threads", cpu.GetThreads()}} {
		switch {
		case c.n < 0:
			errs = append(errs, field.Invalid(path.Child(c.name), c.n, "must be at least 1"))
		case c.n > 0 && product <= maxVCPUs:
			// Stop multiplying once over the limit, so int64 cannot overflow.
			product *= int64(c.n)
		}
	}
	if product > maxVCPUs {
		errs = append(errs, field.Invalid(path, product, "cores × sockets × threads must be at most 512"))
	}
	return errs
}

// nameIndex maps each name to the index of its first occurrence.
// validatePersistentVolume checks a persistent volume's size, image and
// class name at path: a VM's volume, or an AddVolume request's.
func validatePersistentVolume(pv *apiv1.PersistentVolume, path *field.Path, opts Options) field.ErrorList {
	errs := validateDiskSize(pv.GetSize(), path.Child("size"))
	if pv.GetImage() != "" {
		errs = append(errs, ValidateImagePath(pv.GetImage(), path.Child("image"), opts.ImageDir)...)
	}
	if c := pv.GetStorageClass(); c != "" {
		errs = append(errs, dns1123Label(c, path.Child("storage_class"))...)
	}
	return errs
}

type nameIndex map[string]int

type namedResult struct {
	names nameIndex
	errs  field.ErrorList
}

func validateVolumes(volumes []*apiv1.Volume, path *field.Path, opts Options) namedResult {
	r := namedResult{names: nameIndex{}}
	cloudInit := false
	r.errs = eachNamed(volumes, path, r.names, true, func(v *apiv1.Volume, p *field.Path, _ bool) field.ErrorList {
		var errs field.ErrorList
		var sources []string
		if img := v.GetImage(); img != nil {
			sources = append(sources, "image")
			errs = append(errs, ValidateImagePath(img.GetName(), p.Child("image", "name"), opts.ImageDir)...)
		}
		if pv := v.GetPersistent(); pv != nil {
			sources = append(sources, "persistent")
			errs = append(errs, validatePersistentVolume(pv, p.Child("persistent"), opts)...)
		}
		if ci := v.GetCloudInitNoCloud(); ci != nil {
			sources = append(sources, "cloud_init_no_cloud")
			cp := p.Child("cloud_init_no_cloud")
			if cloudInit {
				// Two NoCloud seeds would both claim the "cidata" label.
				errs = append(errs, field.Forbidden(cp, "at most one cloud_init_no_cloud volume is allowed"))
			}
			cloudInit = true
			if len(ci.GetUserData()) > maxCloudInitData {
				errs = append(errs, field.TooLong(cp.Child("user_data"), "", maxCloudInitData))
			}
			if len(ci.GetNetworkData()) > maxCloudInitData {
				errs = append(errs, field.TooLong(cp.Child("network_data"), "", maxCloudInitData))
			}
		}
		if len(sources) == 0 {
			errs = append(errs, field.Required(p, "must set exactly one of image, persistent or cloud_init_no_cloud"))
		}
		for _, extra := range sources[min(1, len(sources)):] {
			errs = append(errs, field.Forbidden(p.Child(extra), "may not be set together with "+sources[0]+"; a volume has exactly one source"))
		}
		return errs
	})
	return r
}

// named is an element of a list whose elements have unique names:
// volumes, networks, disks, interfaces.
type named interface {
	comparable
	GetName() string
}

// eachNamed checks each element of a named list at path: it must be set,
// and its name unique in names (a DNS-1123 label when label is set); then
// check validates the element at p, told whether its name passed.
func eachNamed[T named](items []T, path *field.Path, names nameIndex, label bool, check func(item T, p *field.Path, nameOK bool) field.ErrorList) field.ErrorList {
	var errs field.ErrorList
	var unset T
	for i, item := range items {
		p := path.Index(i)
		if item == unset {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		nameErrs := uniqueName(item.GetName(), p.Child("name"), i, names, label)
		errs = append(errs, nameErrs...)
		errs = append(errs, check(item, p, len(nameErrs) == 0)...)
	}
	return errs
}

// uniqueName checks a list element's name: required, optionally a DNS-1123
// label, and not seen before. The first occurrence is recorded in seen.
func uniqueName(name string, path *field.Path, i int, seen nameIndex, label bool) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if _, dup := seen[name]; dup {
		return field.ErrorList{field.Duplicate(path, name)}
	}
	seen[name] = i
	if label {
		return dns1123Label(name, path)
	}
	return nil
}

// validateDisks checks disks against the volumes they name; used collects
// the names of volumes that have a disk.
func validateDisks(disks []*apiv1.Disk, path *field.Path, volumes nameIndex, used map[string]bool) field.ErrorList {
	bootOrders := map[int32]bool{}
	return eachNamed(disks, path, nameIndex{}, false, func(d *apiv1.Disk, p *field.Path, nameOK bool) field.ErrorList {
		var errs field.ErrorList
		name := d.GetName()
		if nameOK {
			if _, ok := volumes[name]; ok {
				used[name] = true
			} else {
				e := field.NotFound(p.Child("name"), name)
				e.Detail = "no volume with this name; a disk names the volume that backs it"
				errs = append(errs, e)
			}
		}

		switch {
		case d.GetDisk() != nil && d.GetCdrom() != nil:
			errs = append(errs, field.Forbidden(p.Child("cdrom"), "may not be set together with disk; a disk has exactly one target"))
		case d.GetDisk() != nil:
			if bus := d.GetDisk().GetBus(); bus != "" {
				errs = append(errs, oneOf(bus, p.Child("disk", "bus"), apiv1.DiskBuses())...)
			}
		case d.GetCdrom() != nil:
			if bus := d.GetCdrom().GetBus(); bus != "" {
				errs = append(errs, oneOf(bus, p.Child("cdrom", "bus"), apiv1.CDRomBuses())...)
			}
		}

		switch bo := d.GetBootOrder(); {
		case bo < 0:
			errs = append(errs, field.Invalid(p.Child("boot_order"), bo, "must be greater than or equal to 0"))
		case bo == 0: // not bootable by order
		case bootOrders[bo]:
			errs = append(errs, field.Duplicate(p.Child("boot_order"), bo))
		default:
			bootOrders[bo] = true
		}

		return append(errs, validateDiskSerial(d.GetSerial(), p.Child("serial"))...)
	})
}

// validateDiskSerial checks a disk's serial; empty is none.
func validateDiskSerial(s string, path *field.Path) field.ErrorList {
	switch {
	case s == "":
		return nil
	case len(s) > maxDiskSerialLen:
		return field.ErrorList{field.TooLong(path, "", maxDiskSerialLen)}
	case !diskSerialRegexp.MatchString(s):
		return field.ErrorList{field.Invalid(path, s, "must consist of letters, digits, '_', '.', '+' or '-'")}
	}
	return nil
}

// validateInterfaces checks interfaces against networks. Interface names are
// unique and name their network, so no network can have two interfaces.
func validateInterfaces(ifaces []*apiv1.Interface, path *field.Path, networks nameIndex) field.ErrorList {
	macs := map[string]bool{}
	return eachNamed(ifaces, path, nameIndex{}, false, func(iface *apiv1.Interface, p *field.Path, nameOK bool) field.ErrorList {
		var errs field.ErrorList
		name := iface.GetName()
		if _, ok := networks[name]; nameOK && !ok {
			e := field.NotFound(p.Child("name"), name)
			e.Detail = "no network with this name; an interface names the network it connects to"
			errs = append(errs, e)
		}
		if m := iface.GetModel(); m != "" {
			errs = append(errs, oneOf(m, p.Child("model"), apiv1.InterfaceModels())...)
		}
		if mac := iface.GetMacAddress(); mac != "" {
			errs = append(errs, validateMAC(mac, p.Child("mac_address"), macs)...)
		}
		return errs
	})
}

// validateMAC checks a MAC address a user gives an interface (a VM's, or
// a restore's or clone's for the new VM): a unicast, non-zero EUI-48, not
// among seen (canonical forms), to which it is added.
func validateMAC(mac string, path *field.Path, seen map[string]bool) field.ErrorList {
	hw, err := net.ParseMAC(mac)
	switch {
	case err != nil || len(hw) != 6:
		return field.ErrorList{field.Invalid(path, mac, "must be a MAC address such as 02:00:00:00:00:01")}
	case hw[0]&1 != 0:
		return field.ErrorList{field.Invalid(path, mac, "must be a unicast MAC address (least significant bit of the first octet clear)")}
	case hw.String() == "00:00:00:00:00:00":
		return field.ErrorList{field.Invalid(path, mac, "must not be all zeros")}
	case seen[hw.String()]:
		return field.ErrorList{field.Duplicate(path, mac)}
	}
	seen[hw.String()] = true
	return nil
}
