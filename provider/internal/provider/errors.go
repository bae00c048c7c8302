package provider

import (
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// providerDataFrom unpacks what Configure stored. nil means the provider is
// not configured yet (Terraform validates configurations before that).
func providerDataFrom(data any, diags *diag.Diagnostics) *providerData {
	if data == nil {
		return nil
	}
	d, ok := data.(*providerData)
	if !ok {
		diags.AddError("Unexpected provider data",
			fmt.Sprintf("Expected *providerData, got %T. This is a bug in the virtplane provider.", data))
		return nil
	}
	return d
}

// notReadyError explains why a reader cannot run during plan when the
// provider configuration is still unknown.
func notReadyError(d *providerData, what string) (summary, detail string) {
	verb := "is"
	if len(d.unknown) > 1 {
		verb = "are"
	}
	return "virtplane provider configuration is not known yet",
		fmt.Sprintf("Cannot %s during plan: the provider's %s %s known only after apply. "+
			"Add depends_on to this block, naming the resource the provider configuration depends on, so the "+
			"read waits for apply; or apply that resource first.", what, strings.Join(d.unknown, ", "), verb)
}

// apiError turns a failed agent call into a diagnostic that says what was
// being done, where, and what the user can do about it. what is a verb
// phrase ("list nodes").
func apiError(err error, endpoint, what string) (summary, detail string) {
	st, _ := status.FromError(err)
	msg := st.Message()
	switch st.Code() {
	case codes.Unavailable:
		hint := "Check that virtplane-agent is running and that endpoint (or VIRTPLANE_ENDPOINT) points at it."
		if strings.Contains(msg, "x509") || strings.Contains(msg, "certificate") {
			hint = "The agent's TLS certificate was not trusted: set ca_file (or VIRTPLANE_CA_FILE) to the agent's <data-dir>/pki/ca.crt."
		}
		return "virtplane agent unreachable",
			fmt.Sprintf("Cannot %s: the virtplane agent is unreachable at %s: %s\n\n%s", what, endpoint, msg, hint)
	case codes.Unauthenticated:
		return "virtplane agent rejected the credentials",
			fmt.Sprintf("Cannot %s: the agent at %s rejected the request: %s\n\n"+
				"Set token or token_file (or VIRTPLANE_TOKEN / VIRTPLANE_TOKEN_FILE) to the agent's token, "+
				"found in <data-dir>/pki/token on the agent host.", what, endpoint, msg)
	case codes.PermissionDenied:
		return "virtplane agent denied the request",
			fmt.Sprintf("Cannot %s: permission denied by the agent at %s: %s", what, endpoint, msg)
	case codes.DeadlineExceeded, codes.Canceled:
		return "virtplane request did not finish",
			fmt.Sprintf("Cannot %s: the request to %s ended before the agent answered: %s", what, endpoint, msg)
	case codes.Unimplemented:
		return "virtplane agent does not support the request",
			fmt.Sprintf("Cannot %s: the agent at %s does not implement it (%s); upgrade the agent.", what, endpoint, msg)
	}
	return "virtplane agent error",
		fmt.Sprintf("Cannot %s: the agent at %s answered %s: %s", what, endpoint, st.Code(), msg)
}

// resourceReady reports whether a resource can use the client in data,
// adding a diagnostic if not.
func resourceReady(data *providerData, diags *diag.Diagnostics, what string) bool {
	if data == nil {
		diags.AddError("virtplane provider not configured",
			"The resource was used before the provider was configured. This is a bug in the virtplane provider.")
		return false
	}
	if len(data.unknown) > 0 {
		diags.AddError(notReadyError(data, what))
		return false
	}
	return true
}

// readyToRead reports whether a data source can talk to the agent. With
// provider settings still unknown at plan time it defers the read where
// Terraform allows that, and otherwise says which settings are unknown.
func readyToRead(data *providerData, req datasource.ReadRequest, resp *datasource.ReadResponse, what string) bool {
	if data == nil {
		resp.Diagnostics.AddError("virtplane provider not configured",
			"The data source was read before the provider was configured. This is a bug in the virtplane provider.")
		return false
	}
	if len(data.unknown) > 0 {
		if req.ClientCapabilities.DeferralAllowed {
			resp.Deferred = &datasource.Deferred{Reason: datasource.DeferredReasonProviderConfigUnknown}
			return false
		}
		resp.Diagnostics.AddError(notReadyError(data, what))
		return false
	}
	return true
}

// objectKind is how diagnostics word one kind of object.
type objectKind struct {
	noun     string // "virtplane rejected the <noun>"
	title    string // "<title> already exists", "<title> not found"
	one      string // "<one> of that name exists already"
	importID string // what terraform import takes
	// attribute maps an API field path to the attribute it is about.
	attribute func(fieldPath string) (path.Path, bool)
}

var (
	vmKind = objectKind{noun: "virtual machine", title: "Virtual machine", one: "a VM",
		importID: "namespace/name", attribute: attributePath}
	imageKind = objectKind{noun: "image", title: "Image", one: "an image",
		importID: "NAME", attribute: imageAttributePath}
)

// addVMError reports a failed agent call about a VM (see addObjectError).
func addVMError(diags *diag.Diagnostics, err error, endpoint, what string) {
	addObjectError(diags, err, endpoint, what, vmKind)
}

// addImageError reports a failed agent call about an image (see
// addObjectError).
func addImageError(diags *diag.Diagnostics, err error, endpoint, what string) {
	addObjectError(diags, err, endpoint, what, imageKind)
}

// addObjectError reports a failed agent call about an object of kind k.
// Validation errors are attached to the attributes that caused them,
// refusals carry the agent's message, the rest say what to do.
func addObjectError(diags *diag.Diagnostics, err error, endpoint, what string, k objectKind) {
	st := status.Convert(err)
	switch st.Code() {
	case codes.InvalidArgument:
		violations := validation.FieldViolations(err)
		if len(violations) == 0 {
			diags.AddError("virtplane rejected the "+k.noun, fmt.Sprintf("Cannot %s: %s", what, st.Message()))
			return
		}
		sort.SliceStable(violations, func(i, j int) bool { return violations[i].GetField() < violations[j].GetField() })
		for _, v := range violations {
			detail := fmt.Sprintf("Cannot %s: the agent rejected %s: %s", what, v.GetField(), v.GetDescription())
			if p, ok := k.attribute(v.GetField()); ok {
				diags.AddAttributeError(p, "Invalid "+lastStep(p), detail)
			} else {
				diags.AddError("virtplane rejected the "+k.noun, detail)
			}
		}
	case codes.AlreadyExists:
		diags.AddAttributeError(path.Root("name"), k.title+" already exists",
			fmt.Sprintf("Cannot %s: %s of that name exists already (%s). To manage it with Terraform, import it "+
				"(terraform import <address> %s, or an import block); otherwise choose another name.", what, k.one, st.Message(), k.importID))
	case codes.FailedPrecondition:
		diags.AddError("virtplane refused the request", fmt.Sprintf("Cannot %s: %s", what, st.Message()))
	case codes.NotFound:
		diags.AddError(k.title+" not found",
			fmt.Sprintf("Cannot %s: it no longer exists (%s); it was deleted outside Terraform. Refresh, then apply to re-create it.", what, st.Message()))
	default:
		diags.AddError(apiError(err, endpoint, what))
	}
}
