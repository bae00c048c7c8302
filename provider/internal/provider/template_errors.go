package provider

import (
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/path"
)

// Which attribute an agent's validation error about a VM's fields is
// about: the VM resource's own, and those of a pool's
// virtual_machine_template and a replica set's template, whose fields are
// a VM's (poolAttributePath, replicaSetAttributePath).

// vmAttributePath maps an API field path from a validation error
// ("spec.template.spec.domain.devices.disks[1].name") to the attribute
// that set it (disk[1].name). ok is false for fields the schema does not
// expose; such errors are reported against the whole resource.
func vmAttributePath(field string) (path.Path, bool) {
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
		case "persistent.size", "persistent.image", "persistent.storage_class":
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

// networkAttributePath maps the field path of a network, rest after
// "networks[i]", to the attribute that set it. Networks are written in
// interface order, one per interface, so networks[i] is interface[i];
// args are the indexes of the field path ([i], then [j] of a port
// forward).
func networkAttributePath(rest string, args []string) path.Path {
	p := path.Root("interface")
	if len(args) == 0 {
		return p
	}
	i, err := strconv.Atoi(args[0])
	if err != nil {
		return p
	}
	p = p.AtListIndex(i)
	const forwards = ".user.port_forwards[*]"
	switch {
	case rest == ".name":
		return p.AtName("name")
	case rest == ".bridge", rest == ".network":
		return p.AtName(rest[1:])
	case rest == ".bridge.bridge":
		return p.AtName("bridge").AtName("name")
	case rest == ".bridge.vlan":
		return p.AtName("bridge").AtName("vlan")
	case rest == ".network.name":
		return p.AtName("network").AtName("name")
	case strings.HasPrefix(rest, forwards):
		j, err := strconv.Atoi(argAt(args, 1))
		if err != nil {
			return p.AtName("port_forward")
		}
		f := p.AtName("port_forward").AtListIndex(j)
		switch n := strings.TrimPrefix(rest, forwards); n {
		case ".host_port", ".guest_port", ".protocol", ".host_address":
			return f.AtName(n[1:])
		}
		return f
	case rest == ".user", rest == ".user.port_forwards":
		return p.AtName("port_forward")
	}
	return p
}

func argAt(args []string, i int) string {
	if i < len(args) {
		return args[i]
	}
	return ""
}
