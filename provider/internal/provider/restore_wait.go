package provider

import (
	"cmp"
	"context"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Waiting for a restore to complete (named_wait.go's waits, with this
// judge).

func restoreOps(c *client.Client) namedOps[*apiv1.VirtualMachineRestore, apiv1.RestoreEvent] {
	return namedOps[*apiv1.VirtualMachineRestore, apiv1.RestoreEvent]{
		create: func(ctx context.Context, o *apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineRestore, error) {
			return c.Restores.Create(ctx, &apiv1.CreateRestoreRequest{Restore: o})
		},
		get: func(ctx context.Context, key *apiv1.ObjectKey) (*apiv1.VirtualMachineRestore, error) {
			return c.Restores.Get(ctx, &apiv1.GetRestoreRequest{Key: key})
		},
		watch: func(ctx context.Context, o *apiv1.WatchOptions) (grpc.ServerStreamingClient[apiv1.RestoreEvent], error) {
			return c.Restores.Watch(ctx, &apiv1.WatchRestoresRequest{Options: o})
		},
		del: func(ctx context.Context, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error {
			_, err := c.Restores.Delete(ctx, &apiv1.DeleteRestoreRequest{Key: key, Options: o})
			return err
		},
		judge:    judgeRestore,
		describe: describeRestore,
	}
}

// judgeRestore: done once the restore is complete; Failed (or being
// deleted) ends the wait with its error. An error reported while it is
// still in progress (a node's) is only described: the controller decides
// whether it fails.
func judgeRestore(r *apiv1.VirtualMachineRestore) verdict {
	st := r.GetStatus()
	return judgeFinal(r, describeRestore(r), "restore", st.GetPhase() == apiv1.RestoreFailed, st.GetError(),
		st.GetPhase() == apiv1.RestoreSucceeded && st.GetComplete())
}

func describeRestore(r *apiv1.VirtualMachineRestore) string {
	st := r.GetStatus()
	out := "phase " + cmp.Or(st.GetPhase(), "(new)")
	if st.GetMessage() != "" {
		out += ": " + st.GetMessage()
	}
	return out + conditionsText(st.GetConditions()) + errorText(st.GetError())
}
