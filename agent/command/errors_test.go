package command

import (
	"errors"

	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestDescribeError(t *testing.T) {
	invalid, _ := status.New(codes.InvalidArgument, `VirtualMachine "x" is invalid: a; b`).WithDetails(&errdetails.BadRequest{
		FieldViolations: []*errdetails.BadRequest_FieldViolation{
			{Field: "spec.run_strategy", Description: `Unsupported value: "always"`},
			{Description: "no field"},
		},
	})
	noQuorum, _ := status.New(codes.Unavailable, "no quorum: the etcd cluster has no leader").WithDetails(&errdetails.ErrorInfo{
		Reason: apiv1.ReasonStoreUnavailable, Domain: apiv1.ErrorDomain})
	tests := []struct {
		name string
		err  error
		res  *resource
		obj  string
		want string
	}{
		{"violations", invalid.Err(), vmResource, "x", "VirtualMachine \"x\" is invalid:\n  - spec.run_strategy: Unsupported value: \"always\"\n  - no field"},
		{"invalid without details", status.Error(codes.InvalidArgument, "bad selector"), nil, "", "bad selector"},
		{"not found", status.Error(codes.NotFound, `virtualmachine "default/x" not found`), vmResource, "x", `virtualmachine "x" not found`},
		{"node not found", status.Error(codes.NotFound, "nope"), nodeResource, "n1", `node "n1" not found`},
		{"precondition", status.Error(codes.FailedPrecondition, "VM is already running"), vmResource, "x", "VM is already running"},
		{"unimplemented", status.Error(codes.Unimplemented, "start needs the VM controller"), vmResource, "x", "not implemented by this agent yet: start needs the VM controller"},
		{"unauthenticated", status.Error(codes.Unauthenticated, "invalid bearer token"), nil, "", "invalid bearer token (set VIRTPLANE_TOKEN or --token-file)"},
		{"unauthenticated with hint", status.Error(codes.Unauthenticated, "missing bearer token: set VIRTPLANE_TOKEN or --token-file"), nil, "", "missing bearer token: set VIRTPLANE_TOKEN or --token-file"},
		{"unknown CA", status.Error(codes.Unavailable, "x509: certificate signed by unknown authority"), nil, "", "cannot reach the agent: x509: certificate signed by unknown authority (set VIRTPLANE_CA_FILE or --ca-file)"},
		{"store without quorum: the server answered", noQuorum.Err(), vmResource, "x", "no quorum: the etcd cluster has no leader"},
		{"not grpc", errors.New("plain"), vmResource, "x", "plain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := describeError(tt.err, tt.res, tt.obj)
			if err.Error() != tt.want {
				t.Errorf("got  %q\nwant %q", err, tt.want)
			}
			if status.Code(err) != status.Code(tt.err) {
				t.Errorf("code %v lost, got %v", status.Code(tt.err), status.Code(err))
			}
		})
	}
}
