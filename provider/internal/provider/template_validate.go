package provider

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Configuration checks of what VMs and instances are made from: the
// validators of single template attributes, and what the resources'
// ValidateConfig checks across them (validateInstanceSpec).

// validateInstanceSpec checks the instance spec attributes and blocks at
// base (path.Empty() for the root) of cfg as ValidateConfig does, and
// returns its interfaces; ok is false when they are not known yet.
func validateInstanceSpec(ctx context.Context, cfg tfsdk.Config, base path.Path, diags *diag.Diagnostics) (is []interfaceModel, ok bool) {
	var disks types.List
	diags.Append(cfg.GetAttribute(ctx, base.AtName("disk"), &disks)...)
	if !disks.IsNull() && !disks.IsUnknown() {
		var ds []diskModel
		if d := disks.ElementsAs(ctx, &ds, true); !d.HasError() {
			validateDisks(ds, base.AtName("disk"), diags)
		}
	}
	var ifaces types.List
	diags.Append(cfg.GetAttribute(ctx, base.AtName("interface"), &ifaces)...)
	if !ifaces.IsUnknown() {
		// A null list (no interface blocks) has no elements.
		if d := ifaces.ElementsAs(ctx, &is, true); !d.HasError() {
			validateInterfaces(is, base.AtName("interface"), diags)
			ok = true
		}
	}
	var cpu *cpuModel
	if d := cfg.GetAttribute(ctx, base.AtName("cpu"), &cpu); !d.HasError() && cpu != nil {
		total, known := int64(1), true
		for _, n := range []types.Int64{cpu.Cores, cpu.Sockets, cpu.Threads} {
			known = known && !n.IsUnknown()
			if !n.IsNull() && !n.IsUnknown() && n.ValueInt64() > 0 {
				total *= n.ValueInt64()
			}
		}
		if known && total > 512 {
			diags.AddAttributeError(base.AtName("cpu"), "Too many vCPUs",
				fmt.Sprintf("cores × sockets × threads is %d; at most 512 vCPUs are supported.", total))
		}
	}
	var boot *bootModel
	if d := cfg.GetAttribute(ctx, base.AtName("boot"), &boot); !d.HasError() && boot != nil && boot.Kernel.IsNull() {
		diags.AddAttributeError(base.AtName("boot").AtName("kernel"), "Missing kernel",
			"A boot block needs kernel: the kernel image, relative to the node image directory.")
	}
	return is, ok
}

// validateDisks checks the disk blocks ds at list (disk, or a template's).
func validateDisks(ds []diskModel, list path.Path, diags *diag.Diagnostics) {
	names := map[string]int{}
	bootOrders := map[int64]int{}
	cloudInit := -1
	for i, d := range ds {
		p := list.AtListIndex(i)
		var sources []string
		if !d.Image.IsNull() {
			sources = append(sources, "image")
		}
		if d.Persistent != nil {
			sources = append(sources, "persistent")
			if d.Persistent.Size.IsNull() {
				diags.AddAttributeError(p.AtName("persistent").AtName("size"), "Missing disk size",
					"A persistent disk needs size, a quantity such as 10Gi.")
			}
			if d.Persistent.Hotpluggable.ValueBool() {
				validateHotpluggableDisk(d, p, diags)
			}
		}
		if d.CloudInit != nil {
			sources = append(sources, "cloud_init")
			if cloudInit >= 0 {
				diags.AddAttributeError(p.AtName("cloud_init"), "Only one cloud_init disk allowed",
					fmt.Sprintf("%s is a cloud_init disk already; a VM takes at most one (both would claim the cidata label).", list.AtListIndex(cloudInit)))
			}
			cloudInit = i
			if bus := d.Bus.ValueString(); !d.Bus.IsUnknown() && !d.Bus.IsNull() && !slices.Contains(apiv1.CDRomBuses(), bus) {
				diags.AddAttributeError(p.AtName("bus"), "Invalid bus",
					fmt.Sprintf("%s is a cloud_init disk, attached as a CD-ROM, whose bus must be one of %s, got %q.", p, oneOf(apiv1.CDRomBuses()...).list(), bus))
			}
		}
		if len(sources) != 1 && !d.Image.IsUnknown() {
			got := "none"
			if len(sources) > 1 {
				got = strings.Join(sources, " and ")
			}
			diags.AddAttributeError(p, "Disk needs exactly one source",
				fmt.Sprintf("%s must set exactly one of image, persistent or cloud_init; it sets %s.", p, got))
		}
		if !d.Name.IsNull() && !d.Name.IsUnknown() {
			if j, dup := names[d.Name.ValueString()]; dup {
				diags.AddAttributeError(p.AtName("name"), "Duplicate disk name",
					fmt.Sprintf("%s is also named %q; disk names must be unique.", list.AtListIndex(j), d.Name.ValueString()))
			}
			names[d.Name.ValueString()] = i
		}
		if !d.BootOrder.IsNull() && !d.BootOrder.IsUnknown() {
			if j, dup := bootOrders[d.BootOrder.ValueInt64()]; dup {
				diags.AddAttributeError(p.AtName("boot_order"), "Duplicate boot_order",
					fmt.Sprintf("%s has boot_order %d too; boot orders must be unique.", list.AtListIndex(j), d.BootOrder.ValueInt64()))
			}
			bootOrders[d.BootOrder.ValueInt64()] = i
		}
	}
}

// validateHotpluggableDisk checks a hotpluggable disk as the API does
// (validation's hotplug rules): a bus that can be plugged, no boot order.
// The API also refuses one that boots by being the first disk, which
// depends on the boot block.
func validateHotpluggableDisk(d diskModel, p path.Path, diags *diag.Diagnostics) {
	if bus := d.Bus.ValueString(); !d.Bus.IsUnknown() && !d.Bus.IsNull() && !slices.Contains(apiv1.HotplugDiskBuses(), bus) {
		diags.AddAttributeError(p.AtName("bus"), "Invalid bus for a hotpluggable disk",
			fmt.Sprintf("%s is hotpluggable, so its bus must be one of %s (SATA cannot be plugged), got %q.",
				p, oneOf(apiv1.HotplugDiskBuses()...).list(), bus))
	}
	if !d.BootOrder.IsNull() && !d.BootOrder.IsUnknown() {
		diags.AddAttributeError(p.AtName("boot_order"), "A hotpluggable disk cannot boot",
			fmt.Sprintf("%s is hotpluggable and may be unplugged, so it cannot have a boot_order.", p))
	}
}

// validateInterfaces checks the interface blocks is at list.
func validateInterfaces(is []interfaceModel, list path.Path, diags *diag.Diagnostics) {
	names := map[string]int{}
	macs := map[string]int{}
	var forwards []seenForward
	for i, n := range is {
		p := list.AtListIndex(i)
		for j, f := range n.PortForwards {
			validatePortForward(f, p.AtName("port_forward").AtListIndex(j), &forwards, diags)
		}
		if !n.Name.IsNull() && !n.Name.IsUnknown() {
			if j, dup := names[n.Name.ValueString()]; dup {
				diags.AddAttributeError(p.AtName("name"), "Duplicate interface name",
					fmt.Sprintf("%s is also named %q; interface names must be unique.", list.AtListIndex(j), n.Name.ValueString()))
			}
			names[n.Name.ValueString()] = i
		}
		if !n.MACAddress.IsNull() && !n.MACAddress.IsUnknown() {
			mac := strings.ToLower(n.MACAddress.ValueString())
			if j, dup := macs[mac]; dup {
				diags.AddAttributeError(p.AtName("mac_address"), "Duplicate mac_address",
					fmt.Sprintf("%s has MAC address %s too.", list.AtListIndex(j), n.MACAddress.ValueString()))
			}
			macs[mac] = i
		}
	}
}

// validatePortForward refuses a forward whose host port overlaps an
// earlier one's in the VM (both could not listen: validation.HostPort's
// Overlaps, the agent's rule); seen holds the forwards checked so far. An
// unset protocol or address is its default.
func validatePortForward(f portForwardModel, p path.Path, seen *[]seenForward, diags *diag.Diagnostics) {
	for _, v := range []attr.Value{f.HostPort, f.Protocol, f.HostAddress} {
		if v.IsUnknown() {
			return
		}
	}
	port := f.HostPort.ValueInt64()
	if f.HostPort.IsNull() || port < 1 || port > 65535 {
		return // the attribute validators report it
	}
	hp, ok := validation.ForwardHostPort(&apiv1.PortForward{
		HostPort: int32(port), Protocol: f.Protocol.ValueString(), HostAddress: f.HostAddress.ValueString(),
	})
	if !ok {
		return // the attribute validators report it
	}
	for _, s := range *seen {
		if s.hp.Overlaps(hp) {
			diags.AddAttributeError(p.AtName("host_port"), "Duplicate port forward",
				fmt.Sprintf("%s forwards %s, which %s's %s overlaps; no two forwards of a VM may bind the same protocol and host port on overlapping addresses (0.0.0.0 binds them all).",
					p, hp, s.path, s.hp))
			return
		}
	}
	*seen = append(*seen, seenForward{hp, p})
}

// seenForward is a forward validateInterfaces checked, and where.
type seenForward struct {
	hp   validation.HostPort
	path path.Path
}

// ipAddressValidator accepts what a port forward's host address may be,
// as the agent does: an IPv4 address (QEMU's user-mode networking
// forwards from IPv4 host addresses only).
func ipAddressValidator() validator.String {
	return stringCheck{
		describedAs: "must be an IPv4 address such as 127.0.0.1",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			ip, err := netip.ParseAddr(s)
			bad := ""
			switch {
			case err != nil || ip.Zone() != "":
				bad = "must be an IP address such as 127.0.0.1"
			case ip.Is4In6():
				bad = "must be an IPv4 address, not an IPv4-mapped one (write " + ip.Unmap().String() + ")"
			case !ip.Is4():
				bad = "must be an IPv4 address: user-mode networking forwards IPv4 only"
			}
			if bad != "" {
				diags.AddAttributeError(p, "Invalid "+lastStep(p), fmt.Sprintf("%s %s %s.", p, strconv.Quote(s), bad))
			}
		},
	}
}

// macValidator accepts unicast MAC addresses in colon notation.
func macValidator() validator.String {
	return stringCheck{
		describedAs: "must be a unicast MAC address such as 02:00:00:00:00:01",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			hw, err := net.ParseMAC(s)
			bad := ""
			switch {
			case err != nil || len(hw) != 6:
				bad = "must be a MAC address such as 02:00:00:00:00:01"
			case hw[0]&1 != 0:
				bad = "must be a unicast MAC address (least significant bit of the first octet clear)"
			case hw.String() == "00:00:00:00:00:00":
				bad = "must not be all zeros"
			}
			if bad != "" {
				diags.AddAttributeError(p, "Invalid mac_address", fmt.Sprintf("%s %s %s.", p, strconv.Quote(s), bad))
			}
		},
	}
}

// imagePathValidator applies the agent's image reference rules that do
// not depend on the node: no ".." and no NUL. Absolute paths are left to
// the agent, which accepts them inside its image directory only.
func imagePathValidator() validator.String {
	return stringCheck{
		describedAs: "must be a path relative to the node image directory (or an absolute path inside it), without `..`",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if filepath.IsAbs(s) {
				return // only the agent knows its image directory
			}
			addFieldErrors(diags, p, s, validation.ValidateImagePath(s, field.NewPath(p.String()), ""))
		},
	}
}

// maxAnnotationBytes is the agent's (and Kubernetes') limit on keys plus
// values.
const maxAnnotationBytes = 256 * 1024

// annotationMapValidator checks annotation keys (qualified names, case
// ignored) and the total size, as the agent does.
func annotationMapValidator() validator.Map {
	return mapCheck{
		describedAs: "keys must be qualified names (`example.com/name`); keys and values together at most 256 KiB",
		check: func(p path.Path, elems map[string]attr.Value, diags *diag.Diagnostics) {
			total := 0
			for k, e := range elems {
				if msgs := content.IsLabelKey(strings.ToLower(k)); len(msgs) > 0 {
					addBadKey(diags, p, k, msgs)
				}
				total += len(k)
				if s, ok := e.(types.String); ok {
					total += len(s.ValueString())
				}
			}
			if total > maxAnnotationBytes {
				diags.AddAttributeError(p, "Annotations too large",
					fmt.Sprintf("%s hold %d bytes of keys and values; at most %d are allowed.", p, total, maxAnnotationBytes))
			}
		},
	}
}
