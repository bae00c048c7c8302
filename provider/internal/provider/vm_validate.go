package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Configuration checks that single attributes' validators cannot make.

// ValidateConfig checks what single attributes cannot: exactly one source
// per disk, unique names, boot orders and MACs, and the vCPU total.
func (r *vmResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var disks types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("disk"), &disks)...)
	if !disks.IsNull() && !disks.IsUnknown() {
		var ds []diskModel
		if d := disks.ElementsAs(ctx, &ds, true); !d.HasError() {
			validateDisks(ds, &resp.Diagnostics)
		}
	}
	var ifaces types.List
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("interface"), &ifaces)...)
	if !ifaces.IsNull() && !ifaces.IsUnknown() {
		var is []interfaceModel
		if d := ifaces.ElementsAs(ctx, &is, true); !d.HasError() {
			validateInterfaces(is, &resp.Diagnostics)
		}
	}
	var cpu *cpuModel
	if d := req.Config.GetAttribute(ctx, path.Root("cpu"), &cpu); !d.HasError() && cpu != nil {
		total, known := int64(1), true
		for _, n := range []types.Int64{cpu.Cores, cpu.Sockets, cpu.Threads} {
			known = known && !n.IsUnknown()
			if !n.IsNull() && !n.IsUnknown() && n.ValueInt64() > 0 {
				total *= n.ValueInt64()
			}
		}
		if known && total > 512 {
			resp.Diagnostics.AddAttributeError(path.Root("cpu"), "Too many vCPUs",
				fmt.Sprintf("cores × sockets × threads is %d; at most 512 vCPUs are supported.", total))
		}
	}
	var boot *bootModel
	if d := req.Config.GetAttribute(ctx, path.Root("boot"), &boot); !d.HasError() && boot != nil && boot.Kernel.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("boot").AtName("kernel"), "Missing kernel",
			"A boot block needs kernel: the kernel image, relative to the node image directory.")
	}
}

func validateDisks(ds []diskModel, diags *diag.Diagnostics) {
	names := map[string]int{}
	bootOrders := map[int64]int{}
	cloudInit := -1
	for i, d := range ds {
		p := path.Root("disk").AtListIndex(i)
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
					fmt.Sprintf("disk[%d] is a cloud_init disk already; a VM takes at most one (both would claim the cidata label).", cloudInit))
			}
			cloudInit = i
			if bus := d.Bus.ValueString(); !d.Bus.IsUnknown() && !d.Bus.IsNull() && !slices.Contains(apiv1.CDRomBuses(), bus) {
				diags.AddAttributeError(p.AtName("bus"), "Invalid bus",
					fmt.Sprintf("disk[%d] is a cloud_init disk, attached as a CD-ROM, whose bus must be one of %s, got %q.", i, oneOf(apiv1.CDRomBuses()...).list(), bus))
			}
		}
		if len(sources) != 1 && !d.Image.IsUnknown() {
			got := "none"
			if len(sources) > 1 {
				got = strings.Join(sources, " and ")
			}
			diags.AddAttributeError(p, "Disk needs exactly one source",
				fmt.Sprintf("disk[%d] must set exactly one of image, persistent or cloud_init; it sets %s.", i, got))
		}
		if !d.Name.IsNull() && !d.Name.IsUnknown() {
			if j, dup := names[d.Name.ValueString()]; dup {
				diags.AddAttributeError(p.AtName("name"), "Duplicate disk name",
					fmt.Sprintf("disk[%d] is also named %q; disk names must be unique.", j, d.Name.ValueString()))
			}
			names[d.Name.ValueString()] = i
		}
		if !d.BootOrder.IsNull() && !d.BootOrder.IsUnknown() {
			if j, dup := bootOrders[d.BootOrder.ValueInt64()]; dup {
				diags.AddAttributeError(p.AtName("boot_order"), "Duplicate boot_order",
					fmt.Sprintf("disk[%d] has boot_order %d too; boot orders must be unique.", j, d.BootOrder.ValueInt64()))
			}
			bootOrders[d.BootOrder.ValueInt64()] = i
		}
	}
}

func validateInterfaces(is []interfaceModel, diags *diag.Diagnostics) {
	names := map[string]int{}
	macs := map[string]int{}
	for i, n := range is {
		p := path.Root("interface").AtListIndex(i)
		if !n.Name.IsNull() && !n.Name.IsUnknown() {
			if j, dup := names[n.Name.ValueString()]; dup {
				diags.AddAttributeError(p.AtName("name"), "Duplicate interface name",
					fmt.Sprintf("interface[%d] is also named %q; interface names must be unique.", j, n.Name.ValueString()))
			}
			names[n.Name.ValueString()] = i
		}
		if !n.MACAddress.IsNull() && !n.MACAddress.IsUnknown() {
			mac := strings.ToLower(n.MACAddress.ValueString())
			if j, dup := macs[mac]; dup {
				diags.AddAttributeError(p.AtName("mac_address"), "Duplicate mac_address",
					fmt.Sprintf("interface[%d] has MAC address %s too.", j, n.MACAddress.ValueString()))
			}
			macs[mac] = i
		}
	}
}
