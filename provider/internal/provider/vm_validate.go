package provider

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
)

// Configuration checks of virtplane_virtual_machine that single
// attributes' validators cannot make: the template's
// (validateInstanceSpec), and wait_for_ip's.

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

// durationValidator accepts positive Go durations, as the timeouts block
// does.
func durationValidator() validator.String {
	return stringCheck{
		describedAs: "must be a positive Go duration such as `90s` or `5m`",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				diags.AddAttributeError(p, "Invalid "+lastStep(p),
					fmt.Sprintf("%s %s is not a duration: write a number and a unit such as 90s, 5m or 1h.", p, strconv.Quote(s)))
			case d <= 0:
				diags.AddAttributeError(p, "Invalid "+lastStep(p), fmt.Sprintf("%s %s must be positive.", p, strconv.Quote(s)))
			}
		},
	}
}
