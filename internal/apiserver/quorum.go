package apiserver

import (
	"context"
	"errors"
	"fmt"

	middleware "github.com/grpc-ecosystem/go-grpc-middleware/v2"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// noQuorumMessage is what a caller reads when the etcd cluster behind this
// server has no leader. It says what is and is not affected, because the
// first question of an operator who sees it is whether the guests are.
const noQuorumMessage = "no quorum: the etcd cluster has no leader (a majority of its members is unreachable); " +
	"writes resume once a majority is back. Guests keep running; a RestartElsewhere guest's node agent " +
	"destroys it when the node lease runs out (docs/failover.md)"

// Every API call asks etcd to refuse it at once when the member it talks
// to has no leader. Without this a linearizable read waits for etcd's
// request timeout (seconds) and a watch keeps serving a stale view from a
// member cut off from the majority.
func requireLeaderUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(clientv3.WithRequireLeader(ctx), req)
}

func requireLeaderStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	w := middleware.WrapServerStream(ss)
	w.WrappedContext = clientv3.WithRequireLeader(ss.Context())
	return h(srv, w)
}

// quorumStatus maps etcd's "cannot decide now" errors to Unavailable with
// a message an operator can act on; ok is false for any other error.
func quorumStatus(err error) (st error, ok bool) {
	switch {
	case errors.Is(err, rpctypes.ErrNoLeader), errors.Is(err, rpctypes.ErrGRPCNoLeader):
		return storeUnavailable(noQuorumMessage), true
	// etcd calls a proposal timeout "due to leader failure" when a leader
	// was elected while it waited: the cluster has a leader again, often
	// after a planned hand-over, so this is a timeout, not lost quorum.
	case errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail), errors.Is(err, rpctypes.ErrGRPCTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrGRPCTimeout),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost), errors.Is(err, rpctypes.ErrGRPCTimeoutDueToConnectionLost),
		errors.Is(err, rpctypes.ErrLeaderChanged), errors.Is(err, rpctypes.ErrGRPCLeaderChanged):
		return storeUnavailable(fmt.Sprintf("the etcd cluster did not answer in time (%v); it may be electing a leader or short of a majority: retry", err)), true
	case store.IsProposalDropped(err):
		return storeUnavailable("etcd dropped the write while its raft leadership moved between members, even after retries: retry"), true
	}
	return nil, false
}

// storeUnavailable is Unavailable with the ErrorInfo that tells clients
// the server answered (unlike a broken connection): the CLI shows msg as
// it is.
func storeUnavailable(msg string) error {
	return withReason(codes.Unavailable, apiv1.ReasonStoreUnavailable, msg)
}

// withReason is a status error carrying the API's ErrorInfo with reason,
// which clients match on instead of the message.
func withReason(code codes.Code, reason, msg string) error {
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: reason, Domain: apiv1.ErrorDomain})
	if err != nil { // only for a detail that cannot be marshalled
		return status.Error(code, msg)
	}
	return st.Err()
}
