package apiserver

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// conflictMessage is Kubernetes' wording, which users already know.
const conflictMessage = "the object has been modified; please apply your changes to the latest version and try again"

// conflict refuses a write of the object ref of kind that was read from
// another version than the stored one (stale): Aborted, which clients
// retry after reading again.
func conflict(kind, ref string) error {
	return status.Errorf(codes.Aborted, "%s %q: %s", strings.ToLower(kind), ref, conflictMessage)
}

// toStatus maps store and context errors to gRPC status errors.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	// Before the pass-through below: etcd's own errors are gRPC statuses
	// too, and "etcdserver: no leader" alone tells a user nothing.
	if st, ok := quorumStatus(err); ok {
		return st
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, store.ErrAlreadyExists):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, store.ErrQuotaExceeded):
		// Kubernetes answers 403 "exceeded quota"; ResourceExhausted is
		// gRPC's "some resource has been exhausted, perhaps a per-user
		// quota". The message names the namespace and every bound.
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, store.ErrNotEmpty):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, store.ErrConflict):
		return status.Errorf(codes.Aborted, "%v: %s", err, conflictMessage)
	case errors.Is(err, store.ErrInvalid), errors.Is(err, rpctypes.ErrRequestTooLarge), errors.Is(err, rpctypes.ErrGRPCRequestTooLarge):
		// etcd's own size limit is a backstop behind validation's: still the
		// caller's object, never the server's failure.
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, store.ErrExpired):
		// Kubernetes answers 410 Gone; gRPC has no such code, and
		// FailedPrecondition says the call cannot succeed as it is.
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Internal, err.Error())
}
