package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What plan says of the template attributes: defaults that depend on
// other attributes, and MAC addresses known before apply.

// diskBusDefault plans the bus the agent would choose for an unset one:
// virtio for disks, sata for the cloud-init CD-ROM. A static default
// cannot depend on the disk's source.
type diskBusDefault struct{}

func (diskBusDefault) Description(context.Context) string {
	return "defaults to virtio, or sata for a cloud_init disk"
}

func (m diskBusDefault) MarkdownDescription(ctx context.Context) string { return m.Description(ctx) }

func (diskBusDefault) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if !req.ConfigValue.IsNull() {
		return
	}
	var ci types.Object
	if d := req.Plan.GetAttribute(ctx, req.Path.ParentPath().AtName("cloud_init"), &ci); d.HasError() || ci.IsUnknown() {
		return
	}
	if ci.IsNull() {
		resp.PlanValue = types.StringValue(apiv1.DefaultDiskBus)
	} else {
		resp.PlanValue = types.StringValue(apiv1.DefaultCDRomBus)
	}
}

// macFromState plans an interface's MAC address, when the configuration
// leaves it out, as the one the interface of the same name has in the
// prior state: the server assigns a MAC once per VM interface and keeps
// it, so a known plan is exact, and it follows the interface by name, not
// by list position. A new interface's MAC stays unknown until apply.
type macFromState struct{ describedAs }

var _ planmodifier.String = macFromState{}

func (macFromState) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	if !req.ConfigValue.IsNull() || req.State.Raw.IsNull() {
		return
	}
	var name types.String
	if d := req.Plan.GetAttribute(ctx, req.Path.ParentPath().AtName("name"), &name); d.HasError() || name.IsUnknown() {
		return
	}
	var prior []interfaceModel
	if d := req.State.GetAttribute(ctx, path.Root("interface"), &prior); d.HasError() {
		return
	}
	for _, i := range prior {
		if i.Name.Equal(name) && !i.MACAddress.IsNull() && !i.MACAddress.IsUnknown() {
			resp.PlanValue = i.MACAddress
			return
		}
	}
}
