package launcher

import (
	"context"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

func (c *grpcClient) AttachDisk(ctx context.Context, req *launcherpb.AttachDiskRequest) (*launcherpb.DiskAttachment, error) {
	return unary(c, ctx, "AttachDisk", func(ctx context.Context) (*launcherpb.DiskAttachment, error) {
		return c.rpc.AttachDisk(ctx, req)
	})
}

func (c *grpcClient) DetachDisk(ctx context.Context, req *launcherpb.DetachDiskRequest) (*launcherpb.DiskAttachment, error) {
	return unary(c, ctx, "DetachDisk", func(ctx context.Context) (*launcherpb.DiskAttachment, error) {
		return c.rpc.DetachDisk(ctx, req)
	})
}

func (c *grpcClient) Disks(ctx context.Context) (*launcherpb.DiskList, error) {
	return unary(c, ctx, "Disks", func(ctx context.Context) (*launcherpb.DiskList, error) {
		return c.rpc.Disks(ctx, &launcherpb.Empty{})
	})
}
