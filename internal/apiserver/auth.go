package apiserver

import (
	"context"
	"crypto/subtle"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TokenAuth checks the bearer token on every call of a TCP listener. The
// unix socket needs none: its file mode (0600) is the authentication.
type TokenAuth struct {
	Token string
}

func (a TokenAuth) check(ctx context.Context) error {
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get("authorization")
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, "missing bearer token: set VIRTPLANE_TOKEN or --token-file")
	}
	tok, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(a.Token)) != 1 || a.Token == "" {
		return status.Error(codes.Unauthenticated, "invalid bearer token")
	}
	return nil
}

// Unary is the unary interceptor.
func (a TokenAuth) Unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if err := a.check(ctx); err != nil {
		return nil, err
	}
	return h(ctx, req)
}

// Stream is the stream interceptor.
func (a TokenAuth) Stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	if err := a.check(ss.Context()); err != nil {
		return err
	}
	return h(srv, ss)
}
