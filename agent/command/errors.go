package command

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// apiError is a gRPC error reworded for the terminal. It unwraps to the
// original so status.Code still works on it.
type apiError struct {
	msg string
	err error
}

func (e *apiError) Error() string { return e.msg }
func (e *apiError) Unwrap() error { return e.err }

// describeError rewords a gRPC error about object name of kind res (name
// and res may be empty/nil when the call is not about one object). main
// prefixes the result with "error: ".
func describeError(err error, res *resource, name string) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	switch st.Code() {
	case codes.NotFound:
		if res != nil && name != "" {
			msg = fmt.Sprintf("%s %q not found", res.Singular, name)
		}
	case codes.InvalidArgument:
		if v := violations(st); v != "" {
			header := "invalid request:"
			if res != nil && name != "" {
				header = fmt.Sprintf("%s %q is invalid:", res.Kind, name)
			}
			msg = header + v
		}
	case codes.Unimplemented:
		msg = "not implemented by this agent yet: " + msg
	case codes.Unavailable:
		if hasReason(st, apiv1.ReasonStoreUnavailable) {
			break // the server answered: its store cannot decide now
		}
		msg = "cannot reach the agent: " + msg
		if strings.Contains(msg, "x509:") {
			msg += " (set VIRTPLANE_CA_FILE or --ca-file)"
		}
	case codes.Unauthenticated:
		if !strings.Contains(msg, "VIRTPLANE_TOKEN") {
			msg += " (set VIRTPLANE_TOKEN or --token-file)"
		}
	}
	return &apiError{msg: msg, err: err}
}

// hasReason reports whether st carries an ErrorInfo of the API's with
// that reason.
func hasReason(st *status.Status, reason string) bool {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == apiv1.ErrorDomain && info.GetReason() == reason {
			return true
		}
	}
	return false
}

// violations renders the BadRequest field violations one per line.
func violations(st *status.Status) string {
	var b strings.Builder
	for _, d := range st.Details() {
		br, ok := d.(*errdetails.BadRequest)
		if !ok {
			continue
		}
		for _, v := range br.GetFieldViolations() {
			b.WriteString("\n  - ")
			if v.GetField() != "" {
				b.WriteString(v.GetField() + ": ")
			}
			b.WriteString(v.GetDescription())
		}
	}
	return b.String()
}

// interrupted says whether err only reports that the user pressed Ctrl-C.
func interrupted(ctx context.Context, err error) bool {
	return ctx.Err() != nil && (errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled)
}
