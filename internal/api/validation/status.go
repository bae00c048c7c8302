package validation

import (
	"fmt"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxReportedErrors caps what goes into one status: the message and details
// travel in gRPC trailers, whose size is limited, and a client cannot act on
// thousands of errors anyway.
const (
	maxReportedErrors = 100
	// maxErrorLen truncates single errors, whose bad value may be a huge
	// user-supplied string.
	maxErrorLen = 1024
)

// ToStatusError turns validation errors about the object kind/name into an
// InvalidArgument status. The message reads like Kubernetes'
// (`VirtualMachine "web" is invalid: <err>; <err>`), and a BadRequest detail
// carries one FieldViolation per error so clients (the Terraform provider)
// can attach each error to its attribute. Nil for no errors.
func ToStatusError(kind, name string, errs field.ErrorList) error {
	var msgs []string
	br := &errdetails.BadRequest{}
	omitted := 0
	for _, e := range errs {
		if e == nil {
			continue
		}
		if len(msgs) == maxReportedErrors {
			omitted++
			continue
		}
		msgs = append(msgs, clip(e.Error()))
		br.FieldViolations = append(br.FieldViolations, &errdetails.BadRequest_FieldViolation{
			Field:       clip(e.Field),
			Description: clip(e.ErrorBody()),
		})
	}
	if len(msgs) == 0 {
		return nil
	}
	if omitted > 0 {
		msgs = append(msgs, fmt.Sprintf("and %d more errors", omitted))
	}
	msg := fmt.Sprintf("%s %q is invalid: %s", clip(kind), clip(name), strings.Join(msgs, "; "))
	st := status.New(codes.InvalidArgument, strings.ToValidUTF8(msg, "\uFFFD"))
	if withDetails, err := st.WithDetails(br); err == nil {
		st = withDetails
	}
	return st.Err()
}

// FieldViolations extracts the field violations from an error made by
// ToStatusError (also after a trip over the wire, and when wrapped). Nil
// when err carries none.
func FieldViolations(err error) []*errdetails.BadRequest_FieldViolation {
	st, ok := status.FromError(err)
	if !ok || st == nil {
		return nil
	}
	var out []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			out = append(out, br.GetFieldViolations()...)
		}
	}
	return out
}

// clip makes s fit a proto string field (valid UTF-8, which Marshal
// insists on) of at most maxErrorLen bytes.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxErrorLen {
		return s
	}
	s = strings.ToValidUTF8(s[:maxErrorLen], "")
	return s + "…"
}
