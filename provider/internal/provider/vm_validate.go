package provider

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Configuration checks that single attributes' validators cannot make.

// ValidateConfig checks what single attributes cannot: exactly one source
// per disk, unique names, boot orders, MACs and port forwards, the
// interface wait_for_ip names, and the vCPU total.
func (r *vmResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	is, ok := validateInstanceSpec(ctx, req.Config, path.Empty(), &resp.Diagnostics)
	if !ok {
		return
	}
	var w *waitForIPModel
	if d := req.Config.GetAttribute(ctx, path.Root("wait_for_ip"), &w); !d.HasError() && w != nil {
		validateWaitForIP(w, is, &resp.Diagnostics)
	}
}

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

// validateInterfaces checks the interface blocks is at list.
func validateInterfaces(is []interfaceModel, list path.Path, diags *diag.Diagnostics) {
	names := map[string]int{}
	macs := map[string]int{}
	forwards := map[string]path.Path{}
	for i, n := range is {
		p := list.AtListIndex(i)
		for j, f := range n.PortForwards {
			validatePortForward(f, p.AtName("port_forward").AtListIndex(j), forwards, diags)
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

// validatePortForward refuses a second forward of the same protocol, host
// address and port in the VM (both could not listen), as the agent does;
// seen holds the forwards checked so far. An unset protocol or address is
// its default.
func validatePortForward(f portForwardModel, p path.Path, seen map[string]path.Path, diags *diag.Diagnostics) {
	for _, v := range []attr.Value{f.HostPort, f.Protocol, f.HostAddress} {
		if v.IsUnknown() {
			return
		}
	}
	proto := orDefault(f.Protocol.ValueString(), apiv1.DefaultPortForwardProtocol)
	addr, err := netip.ParseAddr(orDefault(f.HostAddress.ValueString(), apiv1.DefaultPortForwardAddress))
	if err != nil || f.HostPort.IsNull() {
		return // the attribute validators report it
	}
	key := proto + " " + netip.AddrPortFrom(addr, uint16(f.HostPort.ValueInt64())).String()
	if first, dup := seen[key]; dup {
		diags.AddAttributeError(p.AtName("host_port"), "Duplicate port forward",
			fmt.Sprintf("%s forwards %s, as %s does already; no two forwards of a VM may share protocol, host address and host port.", p, key, first))
		return
	}
	seen[key] = p
}

// validateWaitForIP checks that wait_for_ip names an interface the VM has,
// or that there is a first one to default to.
func validateWaitForIP(w *waitForIPModel, is []interfaceModel, diags *diag.Diagnostics) {
	if w.Interface.IsUnknown() {
		return
	}
	var names []string
	for _, i := range is {
		if i.Name.IsUnknown() {
			return
		}
		names = append(names, i.Name.ValueString())
	}
	switch {
	case len(is) == 0:
		diags.AddAttributeError(path.Root("wait_for_ip"), "wait_for_ip without an interface",
			"wait_for_ip waits for an IP address of an interface, and the VM has no interface block.")
	case !w.Interface.IsNull() && !slices.Contains(names, w.Interface.ValueString()):
		diags.AddAttributeError(path.Root("wait_for_ip").AtName("interface"), "Unknown interface",
			fmt.Sprintf("wait_for_ip.interface is %q, but the VM's interfaces are %s.", w.Interface.ValueString(), quoteAll(names)))
	}
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}
