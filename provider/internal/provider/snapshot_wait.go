package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The waits of the snapshot, restore and clone kinds: one object each,
// read by name and watched by name, and the judges that decide when a
// wait is over (pure functions of what was read, unit tested).

// namedOps reads, watches and deletes objects of one snapshot kind.
type namedOps[T metaObject, E any] struct {
	get   func(ctx context.Context, key *apiv1.ObjectKey) (T, error)
	watch func(ctx context.Context, o *apiv1.WatchOptions) (grpc.ServerStreamingClient[E], error)
	del   func(ctx context.Context, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error
}

func snapshotOps(c *client.Client) namedOps[*apiv1.VirtualMachineSnapshot, apiv1.SnapshotEvent] {
	return namedOps[*apiv1.VirtualMachineSnapshot, apiv1.SnapshotEvent]{
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
	}
}

func restoreOps(c *client.Client) namedOps[*apiv1.VirtualMachineRestore, apiv1.RestoreEvent] {
	return namedOps[*apiv1.VirtualMachineRestore, apiv1.RestoreEvent]{
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
	}
}

func cloneOps(c *client.Client) namedOps[*apiv1.VirtualMachineClone, apiv1.CloneEvent] {
	return namedOps[*apiv1.VirtualMachineClone, apiv1.CloneEvent]{
		get: func(ctx context.Context, key *apiv1.ObjectKey) (*apiv1.VirtualMachineClone, error) {
			return c.Clones.Get(ctx, &apiv1.GetCloneRequest{Key: key})
		},
		watch: func(ctx context.Context, o *apiv1.WatchOptions) (grpc.ServerStreamingClient[apiv1.CloneEvent], error) {
			return c.Clones.Watch(ctx, &apiv1.WatchClonesRequest{Options: o})
		},
		del: func(ctx context.Context, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error {
			_, err := c.Clones.Delete(ctx, &apiv1.DeleteCloneRequest{Key: key, Options: o})
			return err
		},
	}
}

// waitNamed waits until judge says done or fails, or ctx ends
// (waitUntil), for the object key; what names it in logs.
func waitNamed[T metaObject, E any](ctx context.Context, ops namedOps[T, E], what string, key *apiv1.ObjectKey, judge func(T) verdict) (T, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, notify := notifier()
	go func() {
		w, err := ops.watch(wctx, &apiv1.WatchOptions{Namespace: key.GetNamespace(), Name: key.GetName()})
		if err == nil {
			_ = client.EachEvent(w, func(*E) error { notify(); return nil })
		}
	}()
	return waitUntil(ctx, what, ch, func(ctx context.Context) (T, error) { return ops.get(ctx, key) }, judge)
}

// deleteNamed deletes the object key if it still has uid ("" skips the
// check) and waits until it is gone: its controller and node remove
// their finalizers once the data they hold is gone. gone reports whether
// it was ours and is gone now; replaced that another object of the same
// name was left alone. describe says what the object does, for the
// timeout's message.
func deleteNamed[T metaObject, E any](ctx context.Context, ops namedOps[T, E], what string, key *apiv1.ObjectKey, uid string,
	describe func(T) string) (replaced bool, err error) {
	err = ops.del(ctx, key, &apiv1.DeleteOptions{Uid: uid})
	switch {
	case status.Code(err) == codes.NotFound:
		return false, nil
	case status.Code(err) == codes.FailedPrecondition && uid != "":
		return true, nil
	case err != nil:
		return false, err
	}
	tflog.Info(ctx, what+" deletion requested", map[string]any{"id": namespacedID(key.GetNamespace(), key.GetName())})
	_, err = waitNamed(ctx, ops, what, key, func(o T) verdict {
		if uid != "" && o.GetMetadata().GetUid() != uid {
			return verdict{done: true, state: "replaced"} // ours is gone
		}
		return verdict{state: describe(o)}
	})
	return false, goneWhenNotFound(err)
}

// addDeleteFailure reports a failed deleteNamed of object id of kind k;
// slow says what may take long ("the node removes the snapshot's data").
func (r *configuredResource) addDeleteFailure(diags *diag.Diagnostics, err error, replaced bool, id string, timeout time.Duration, slow string) {
	k := r.kind
	switch {
	case replaced:
		diags.AddWarning(k.title+" "+id+" was replaced outside Terraform",
			"The "+k.short+" Terraform created is already gone; the "+k.short+" now named "+id+
				" was created by someone else and was left alone.")
	case errors.Is(err, errWaitTimeout):
		diags.AddError("Timed out deleting "+k.noun+" "+id,
			fmt.Sprintf("The %s was still there after %s: %s. %s; a node that stopped answering holds it until it "+
				"answers again. Raise timeouts.delete.", k.short, timeout, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": "), slow))
	case err != nil:
		r.addError(diags, err, "delete "+k.noun+" "+id)
	}
}

// judgeSnapshot: done once the snapshot is Succeeded and ready to use;
// a Failed snapshot or one being deleted ends the wait with its error.
func judgeSnapshot(s *apiv1.VirtualMachineSnapshot) verdict {
	st := s.GetStatus()
	out := verdict{state: describeSnapshot(s)}
	switch {
	case s.GetMetadata().GetDeletionTimestamp() != nil:
		out.err = errors.New("it is being deleted")
	case st.GetPhase() == apiv1.SnapshotFailed:
		out.err = fmt.Errorf("the snapshot failed: %s", orDefault(st.GetError(), "no reason given"))
	case st.GetPhase() == apiv1.SnapshotSucceeded && st.GetReadyToUse():
		out.done = true
	}
	return out
}

// describeSnapshot says what a snapshot is doing: its phase and what its
// controller waits for (Progressing's message), or its last error.
func describeSnapshot(s *apiv1.VirtualMachineSnapshot) string {
	st := s.GetStatus()
	out := "phase " + orDefault(st.GetPhase(), "(new)")
	return out + conditionsText(st.GetConditions()) + errorText(st.GetError())
}

// conditionsText renders the conditions that carry a message, and
// errorText an error, for describe functions.
func conditionsText(conds []*apiv1.Condition) string {
	var out string
	for _, c := range conds {
		if c.GetMessage() != "" {
			out += fmt.Sprintf(", %s=%s (%s): %s", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage())
		}
	}
	return out
}

func errorText(e string) string {
	if e == "" {
		return ""
	}
	return ", error: " + e
}

// judgeRestore: done once the restore is complete; Failed (or being
// deleted) ends the wait with its error. An error reported while it is
// still in progress (a node's) is only described: the controller decides
// whether it fails.
func judgeRestore(r *apiv1.VirtualMachineRestore) verdict {
	st := r.GetStatus()
	out := verdict{state: describeRestore(r)}
	switch {
	case r.GetMetadata().GetDeletionTimestamp() != nil:
		out.err = errors.New("it is being deleted")
	case st.GetPhase() == apiv1.RestoreFailed:
		out.err = fmt.Errorf("the restore failed: %s", orDefault(st.GetError(), "no reason given"))
	case st.GetPhase() == apiv1.RestoreSucceeded && st.GetComplete():
		out.done = true
	}
	return out
}

func describeRestore(r *apiv1.VirtualMachineRestore) string {
	st := r.GetStatus()
	out := "phase " + orDefault(st.GetPhase(), "(new)")
	if st.GetMessage() != "" {
		out += ": " + st.GetMessage()
	}
	return out + conditionsText(st.GetConditions()) + errorText(st.GetError())
}

// judgeClone: done once the clone is Succeeded; Failed (or being
// deleted) ends the wait with its error.
func judgeClone(c *apiv1.VirtualMachineClone) verdict {
	st := c.GetStatus()
	out := verdict{state: describeClone(c)}
	switch {
	case c.GetMetadata().GetDeletionTimestamp() != nil:
		out.err = errors.New("it is being deleted")
	case st.GetPhase() == apiv1.CloneFailed:
		out.err = fmt.Errorf("the clone failed: %s", orDefault(st.GetError(), "no reason given"))
	case st.GetPhase() == apiv1.CloneSucceeded:
		out.done = true
	}
	return out
}

func describeClone(c *apiv1.VirtualMachineClone) string {
	st := c.GetStatus()
	out := "phase " + orDefault(st.GetPhase(), "(new)")
	if st.GetRestoreName() != "" {
		out += ", restore " + st.GetRestoreName()
	}
	return out + conditionsText(st.GetConditions()) + errorText(st.GetError())
}
