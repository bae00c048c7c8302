package launcher

import (
	"context"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

func (c *grpcClient) SnapshotDisks(ctx context.Context, req *launcherpb.SnapshotDisksRequest) (*launcherpb.SnapshotDisksResponse, error) {
	return unary(c, ctx, "SnapshotDisks", func(ctx context.Context) (*launcherpb.SnapshotDisksResponse, error) {
		return c.rpc.SnapshotDisks(ctx, req)
	})
}

func (c *grpcClient) CommitDisks(ctx context.Context, req *launcherpb.CommitDisksRequest) error {
	_, err := unary(c, ctx, "CommitDisks", func(ctx context.Context) (*launcherpb.Empty, error) {
		return c.rpc.CommitDisks(ctx, req)
	})
	return err
}

func (c *grpcClient) Freeze(ctx context.Context, req *launcherpb.FreezeRequest) (*launcherpb.SnapshotDisksResponse, error) {
	return unary(c, ctx, "Freeze", func(ctx context.Context) (*launcherpb.SnapshotDisksResponse, error) {
		return c.rpc.Freeze(ctx, req)
	})
}

func (c *grpcClient) Thaw(ctx context.Context) error {
	_, err := unary(c, ctx, "Thaw", func(ctx context.Context) (*launcherpb.Empty, error) {
		return c.rpc.Thaw(ctx, &launcherpb.Empty{})
	})
	return err
}
