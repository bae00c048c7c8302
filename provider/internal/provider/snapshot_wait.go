package provider

import (
	"cmp"
	"context"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Waiting for a snapshot to succeed (named_wait.go's waits, with this
// judge).

func snapshotOps(c *client.Client) namedOps[*apiv1.VirtualMachineSnapshot, apiv1.SnapshotEvent] {
	return namedOps[*apiv1.VirtualMachineSnapshot, apiv1.SnapshotEvent]{
		create: func(ctx context.Context, o *apiv1.VirtualMachineSnapshot) (*apiv1.VirtualMachineSnapshot, error) {
			return c.Snapshots.Create(ctx, &apiv1.CreateSnapshotRequest{Snapshot: o})
		},
		get: func(ctx context.Context, key *apiv1.ObjectKey) (*apiv1.VirtualMachineSnapshot, error) {
			return c.Snapshots.Get(ctx, &apiv1.GetSnapshotRequest{Key: key})
		},
		watch: func(ctx context.Context, o *apiv1.WatchOptions) (grpc.ServerStreamingClient[apiv1.SnapshotEvent], error) {
			return c.Snapshots.Watch(ctx, &apiv1.WatchSnapshotsRequest{Options: o})
		},
		del: func(ctx context.Context, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error {
			_, err := c.Snapshots.Delete(ctx, &apiv1.DeleteSnapshotRequest{Key: key, Options: o})
			return err
		},
		judge:    judgeSnapshot,
		describe: describeSnapshot,
	}
}

// judgeSnapshot: done once the snapshot is Succeeded and ready to use;
// a Failed snapshot or one being deleted ends the wait with its error.
func judgeSnapshot(s *apiv1.VirtualMachineSnapshot) verdict {
	st := s.GetStatus()
	return judgeFinal(s, describeSnapshot(s), "snapshot", st.GetPhase() == apiv1.SnapshotFailed, st.GetError(),
		st.GetPhase() == apiv1.SnapshotSucceeded && st.GetReadyToUse())
}

// describeSnapshot says what a snapshot is doing: its phase and what its
// controller waits for (Progressing's message), or its last error.
func describeSnapshot(s *apiv1.VirtualMachineSnapshot) string {
	st := s.GetStatus()
	out := "phase " + cmp.Or(st.GetPhase(), "(new)")
	return out + conditionsText(st.GetConditions()) + errorText(st.GetError())
}
