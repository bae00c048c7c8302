package apiserver

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestToStatusNamesLostQuorum(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code codes.Code
		want string
	}{
		{fmt.Errorf("put vm: %w", rpctypes.ErrNoLeader), codes.Unavailable, "no quorum"},
		{rpctypes.ErrGRPCNoLeader, codes.Unavailable, "no quorum"},
		{fmt.Errorf("txn: %w", rpctypes.ErrTimeoutDueToLeaderFail), codes.Unavailable, "did not answer in time"},
		{rpctypes.ErrTimeout, codes.Unavailable, "did not answer in time"},
		{fmt.Errorf("create: %w", status.Error(codes.Unknown, "raft proposal dropped")), codes.Unavailable, "leadership moved"},
		{errors.New("disk on fire"), codes.Internal, "disk on fire"},
	} {
		st, _ := status.FromError(toStatus(tc.err))
		if st.Code() != tc.code || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("toStatus(%v) = %v %q, want %v containing %q", tc.err, st.Code(), st.Message(), tc.code, tc.want)
		}
		var reason string
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok {
				reason = info.GetReason()
			}
		}
		if want := map[codes.Code]string{codes.Unavailable: apiv1.ReasonStoreUnavailable}[tc.code]; reason != want {
			t.Errorf("toStatus(%v): ErrorInfo reason %q, want %q", tc.err, reason, want)
		}
	}
}
