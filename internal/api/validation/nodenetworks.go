package validation

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MaxNodeBridges and MaxNodeNetworks bound a node's network inventory.
// The lists live in the Node object, which etcd takes in one request of
// at most 1.5 MiB next to the image list; a thousand 15-byte bridge names
// and a thousand 63-byte network names stay under 100 KiB. No host that
// runs guests has more: node agents cut their lists short here.
const (
	MaxNodeBridges  = 1000
	MaxNodeNetworks = 1000
)

// ValidateNodeNetworks checks the bridges and libvirt networks a node
// reports (status.bridges, status.networks): names as instances spell
// them (a Linux interface name, a libvirt network name), printable, since
// they end up in tables and placement messages, and each listed once.
func ValidateNodeNetworks(bridges, networks []string, bridgesPath, networksPath *field.Path) field.ErrorList {
	errs := validateNodeNames(bridges, MaxNodeBridges, bridgesPath, validateIfName)
	return append(errs, validateNodeNames(networks, MaxNodeNetworks, networksPath, validateLibvirtNetworkName)...)
}

// ValidateNodeBridgeName and ValidateNodeNetworkName check one entry as
// ValidateNodeNetworks does, for a node agent that leaves out what the
// server would refuse rather than be refused whole.
func ValidateNodeBridgeName(name string, p *field.Path) field.ErrorList {
	return validateNodeName(name, p, validateIfName)
}

// ValidateNodeNetworkName: see ValidateNodeBridgeName.
func ValidateNodeNetworkName(name string, p *field.Path) field.ErrorList {
	return validateNodeName(name, p, validateLibvirtNetworkName)
}

func validateNodeNames(names []string, limit int, path *field.Path, valid func(string, *field.Path) field.ErrorList) field.ErrorList {
	if len(names) > limit {
		return field.ErrorList{field.TooMany(path, len(names), limit)}
	}
	var errs field.ErrorList
	seen := make(map[string]bool, len(names))
	for i, name := range names {
		p := path.Index(i)
		if nerrs := validateNodeName(name, p, valid); len(nerrs) > 0 {
			errs = append(errs, nerrs...)
			continue
		}
		if seen[name] {
			errs = append(errs, field.Duplicate(p, name))
		}
		seen[name] = true
	}
	return errs
}

// validateNodeName applies valid, then refuses control characters, which
// the kernel allows in an interface name but a terminal would interpret.
func validateNodeName(name string, p *field.Path, valid func(string, *field.Path) field.ErrorList) field.ErrorList {
	if errs := valid(name, p); len(errs) > 0 {
		return errs
	}
	// Spaces are the kind's to refuse: interface names have none, libvirt
	// network names may.
	return validatePrintable(name, len(name), p, true)
}
