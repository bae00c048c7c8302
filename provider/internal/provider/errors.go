package provider

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The diagnostics every kind shares: a failed agent call, an object the
// agent rejected, a wait that ended early. Each kind's own wording (its
// objectKind, the attributes its agent errors land on, its waits'
// failures) is its errors part (<kind>_errors.go, or <kind>_resource.go
// where it is short).

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
		// The agent's message names the identity and the role that would
		// allow the call ("needs edit in team-a"): it is the advice.
		return "virtplane agent denied the request",
			fmt.Sprintf("Cannot %s: permission denied by the agent at %s: %s", what, endpoint, msg)
	case codes.ResourceExhausted:
		// A namespace's quota: the message names the bound, what is used
		// and what the request asks.
		return "virtplane namespace quota exceeded",
			fmt.Sprintf("Cannot %s: %s\n\nFree something in the namespace or ask a cluster-admin to raise its quota "+
				"(virtplane_namespace, or virtplane-agent namespace set-quota).", what, msg)
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

// addListError reports a failed list call filtered by selector. The
// validator catches bad selectors first; this covers an agent whose
// selector syntax differs from ours.
func addListError(diags *diag.Diagnostics, err error, endpoint string, selector types.String, what string) {
	if status.Code(err) == codes.InvalidArgument {
		diags.AddAttributeError(path.Root("label_selector"), "Invalid label_selector",
			"The agent rejected label_selector "+selector.String()+": "+status.Convert(err).Message())
		return
	}
	diags.AddError(apiError(err, endpoint, what))
}

// addLookupError reports a data source's failed read of the object of
// kind k named id; a missing one is an error that says where to look
// instead (hint).
func addLookupError(diags *diag.Diagnostics, err error, endpoint string, k objectKind, id, hint string) {
	if status.Code(err) == codes.NotFound {
		diags.AddError(k.title+" not found", "There is no "+k.noun+" "+id+" "+hint)
		return
	}
	addObjectError(diags, err, endpoint, "read "+k.noun+" "+id, k)
}

// addNodeNotFound reports, on the node attribute, that no node called
// name has registered (a resource that is a node's: its maintenance, its
// labels).
func addNodeNotFound(diags *diag.Diagnostics, name string) {
	diags.AddAttributeError(path.Root("node"), "Node not found",
		fmt.Sprintf("No node called %q has registered with the agent; virtplane_nodes lists those that have.", name))
}

// objectKind is how diagnostics word one kind of object.
type objectKind struct {
	noun     string // "virtplane rejected the <noun>"
	title    string // "<title> already exists", "<title> not found"
	one      string // "<one> of that name exists already"
	short    string // "the <short> Terraform created"
	logKey   string // names the object in log fields
	importID string // what terraform import takes
	// attribute maps an API field path to the attribute it is about.
	attribute func(fieldPath string) (path.Path, bool)
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

// addError reports a failed agent call (see addObjectError).
func (r *configuredResource) addError(diags *diag.Diagnostics, err error, what string) {
	addObjectError(diags, err, r.data.endpoint, what, r.kind)
}

// waitFailure words the diagnostic of a wait that ended without its
// target.
type waitFailure struct {
	want  string // what was waited for: "to have 3 ready VMs on its current template"
	slow  string // who may need longer: "the guest needs", "its VMs need"
	stuck string // the summary's end when the wait stopped early: "cannot reach ..."
}

// addWaitFailure explains why a wait for object id ended early (err): time
// ran out (errWaitTimeout), the object disappeared, a call failed, or the
// judge found it cannot get there.
func (r *configuredResource) addWaitFailure(diags *diag.Diagnostics, err error, id string, f waitFailure, timeout time.Duration, op string) {
	k := r.kind
	switch {
	case errors.Is(err, errWaitTimeout):
		diags.AddError("Timed out waiting for "+k.noun+" "+id,
			fmt.Sprintf("Waited %s for %s %s; %s. Raise timeouts.%s if %s longer.",
				timeout, id, f.want, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": "), op, f.slow))
	case status.Code(err) == codes.NotFound:
		diags.AddError(k.title+" "+id+" disappeared",
			"The "+k.short+" was deleted by someone else while Terraform waited for it "+f.want+".")
	case status.Code(err) != codes.Unknown:
		r.addError(diags, err, "wait for "+k.noun+" "+id+" "+f.want)
	default:
		diags.AddError(k.title+" "+id+" "+f.stuck,
			fmt.Sprintf("Waiting for %s %s stopped early: %s.", id, f.want, err))
	}
}
