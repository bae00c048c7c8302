package testutil

import (
	"context"
	"net"
	"os"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// ServeGRPC serves the services register adds on an in-memory listener,
// on a server made with opts (interceptors, say), until the test ends, and
// returns a connection to them.
func ServeGRPC(tb testing.TB, register func(grpc.ServiceRegistrar), opts ...grpc.ServerOption) *grpc.ClientConn {
	tb.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(opts...)
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	tb.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return conn
}

// ShortTempDir is a temporary directory, removed when the test ends, short
// enough for unix socket paths in it: they are limited to 108 bytes, and
// t.TempDir() can be deeper than that allows.
func ShortTempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "vp")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
