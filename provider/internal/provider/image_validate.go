package provider

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Plan-time checks of virtplane_image. They call the agent's own
// validation (internal/api/validation) wherever it exists, so that the
// provider and the agent cannot disagree on what a valid Image is.

// imageNameValidator: an Image's name is both an object name (a DNS-1123
// subdomain) and the file name nodes store it under.
func imageNameValidator() validator.String {
	return stringCheck{
		describedAs: "must be a DNS-1123 subdomain that is also an image file name, such as `debian-12.qcow2`",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			errs := validation.ValidateObjectMeta(&apiv1.ObjectMeta{Name: s}, false, field.NewPath("metadata"))
			if len(errs) == 0 {
				errs = validation.ValidateImageName(s, field.NewPath(p.String()))
			}
			addFieldErrors(diags, p, s, errs)
		},
	}
}

// imageURLValidator applies the agent's URL rules: https, http or file,
// a host (or an absolute clean path), no credentials.
func imageURLValidator() validator.String {
	return stringCheck{
		describedAs: "must be an https://, http:// or file:// URL without credentials",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			// The URL rules are only reachable through a whole Image: give it
			// a valid rest and keep the errors about the URL.
			img := &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: "x"}, Spec: &apiv1.ImageSpec{Url: s}}
			var errs field.ErrorList
			for _, e := range validation.ValidateImage(img) {
				if e.Field == "spec.url" || strings.HasPrefix(e.Field, "spec.url.") {
					errs = append(errs, e)
				}
			}
			addFieldErrors(diags, p, validation.RedactURL(s), errs)
		},
	}
}

// sha256Re is stricter than the agent, which also trims spaces: a spelling
// the agent changes beyond its case would show as a change on every plan.
var sha256Re = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// sha256Validator accepts 64 hex digits in either case.
func sha256Validator() validator.String {
	return stringCheck{
		describedAs: "must be 64 hex digits (a SHA-256), in either case",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if !sha256Re.MatchString(s) {
				diags.AddAttributeError(p, "Invalid "+lastStep(p),
					fmt.Sprintf("%s %s must be 64 hex digits, the SHA-256 of the image file (sha256sum prints it), got %d characters.",
						p, strconv.Quote(s), len(s)))
			}
		},
	}
}

// ValidateConfig checks what involves more than one attribute: a format
// that contradicts the name's extension (debian.qcow2 with format raw).
func (r *imageResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var name, format types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("name"), &name)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("format"), &format)...)
	if resp.Diagnostics.HasError() || name.IsUnknown() || name.IsNull() || format.IsUnknown() || format.IsNull() {
		return
	}
	if err := formatContradiction(name.ValueString(), format.ValueString()); err != "" {
		resp.Diagnostics.AddAttributeError(path.Root("format"), "Invalid format", err)
	}
}

// formatContradiction returns the agent's objection to format for an
// Image named name, when it is that the two disagree; "" otherwise (an
// unsupported format is the schema validator's to report).
func formatContradiction(name, format string) string {
	img := &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.ImageSpec{Url: "file:///x", Format: format}}
	for _, e := range validation.ValidateImage(img) {
		if e.Field == "spec.format" && e.Type == field.ErrorTypeInvalid {
			return fmt.Sprintf("format %q: %s: name %q. Leave format unset to take it from the extension, or rename the image.",
				format, e.Detail, name)
		}
	}
	return ""
}
