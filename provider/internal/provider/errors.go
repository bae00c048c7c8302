package provider

import (
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/datasource"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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
