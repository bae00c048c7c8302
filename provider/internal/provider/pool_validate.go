package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Configuration checks of virtplane_virtual_machine_pool.

// maxUnavailableValidator accepts what the API does (apiv1.ParseMaxUnavailable).
func maxUnavailableValidator() validator.String {
	return stringCheck{
		describedAs: describedAs(apiv1.ErrMaxUnavailable.Error()),
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if _, _, err := apiv1.ParseMaxUnavailable(s); err != nil {
				diags.AddAttributeError(p, "Invalid max_unavailable", fmt.Sprintf("%s %s.", p, err))
			}
		},
	}
}

// ValidateConfig checks what single attributes cannot: the template as
// the VM resource checks its settings, and the selector against the
// template's labels.
func (r *poolResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	validateTemplate(ctx, req.Config, path.Root("virtual_machine_template"), &resp.Diagnostics)
}
