package launcher

import (
	"context"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// migrationCall runs one unary RPC returning a MigrationStatus.
func (c *grpcClient) migrationCall(ctx context.Context, name string, fn func(context.Context) (*launcherpb.MigrationStatus, error)) (*launcherpb.MigrationStatus, error) {
	return unary(c, ctx, name, fn)
}

func (c *grpcClient) Migrate(ctx context.Context, req *launcherpb.MigrateRequest) (*launcherpb.MigrationStatus, error) {
	return c.migrationCall(ctx, "Migrate", func(ctx context.Context) (*launcherpb.MigrationStatus, error) {
		return c.rpc.Migrate(ctx, req)
	})
}

func (c *grpcClient) GetMigration(ctx context.Context) (*launcherpb.MigrationStatus, error) {
	return c.migrationCall(ctx, "GetMigration", func(ctx context.Context) (*launcherpb.MigrationStatus, error) {
		return c.rpc.GetMigration(ctx, &launcherpb.Empty{})
	})
}

func (c *grpcClient) AbortMigration(ctx context.Context) (*launcherpb.MigrationStatus, error) {
	return c.migrationCall(ctx, "AbortMigration", func(ctx context.Context) (*launcherpb.MigrationStatus, error) {
		return c.rpc.AbortMigration(ctx, &launcherpb.Empty{})
	})
}

func (c *grpcClient) Incoming(ctx context.Context, migrationUID string, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions, validFor time.Duration) (*launcherpb.MigrationStatus, error) {
	return c.migrationCall(ctx, "Incoming", func(ctx context.Context) (*launcherpb.MigrationStatus, error) {
		return c.rpc.Incoming(ctx, &launcherpb.IncomingRequest{
			MigrationUid:   migrationUID,
			Sync:           &launcherpb.SyncRequest{Vmi: vmi, Options: opts},
			ValidForMillis: validFor.Milliseconds(),
		})
	})
}
