package fakenode

import (
	"context"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The node's part of snapshots and restores (docs/snapshots.md), without
// disks: a content labelled with this node succeeds at once with one
// (empty) copy per volume it names, a restore's staging and swap are done
// as soon as asked, and the data finalizers are dropped when the real
// node would have removed the data.

// snapshotRetry is how long a watch of contents or restores waits before
// trying again (a server without the snapshot services answers
// Unimplemented every time).
const snapshotRetry = time.Second

// SnapshotPath is where the fake node says it keeps volume vol of
// content uid: the real layout under a root that is no real directory.
func SnapshotPath(node, contentUID, vol string) string {
	return "/fakenode/" + node + "/snapshots/" + contentUID + "/" + vol + ".qcow2"
}

func (n *Node) selector() *apiv1.WatchOptions {
	return &apiv1.WatchOptions{LabelSelector: apiv1.LabelNodeName + "=" + n.opts.Name}
}

func (n *Node) contentLoop(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := n.c.SnapshotContents.Watch(ctx, &apiv1.WatchSnapshotContentsRequest{Options: n.selector()})
		if err == nil {
			for {
				ev, err := w.Recv()
				if err != nil {
					break
				}
				if ev.Object != nil && ev.Type != apiv1.EventType_DELETED && !n.isDead() {
					n.handleContent(ctx, ev.Object)
				}
			}
		}
		sleep(ctx, snapshotRetry)
	}
}

func (n *Node) restoreLoop(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := n.c.Restores.Watch(ctx, &apiv1.WatchRestoresRequest{Options: n.selector()})
		if err == nil {
			for {
				ev, err := w.Recv()
				if err != nil {
					break
				}
				if ev.Object != nil && ev.Type != apiv1.EventType_DELETED && !n.isDead() {
					n.handleRestore(ctx, ev.Object)
				}
			}
		}
		sleep(ctx, snapshotRetry)
	}
}

// handleContent does the node's step for a content as it now is.
func (n *Node) handleContent(ctx context.Context, ct *apiv1.VirtualMachineSnapshotContent) {
	key := &apiv1.ObjectKey{Namespace: ct.GetMetadata().GetNamespace(), Name: ct.GetMetadata().GetName()}
	n.updateContent(ctx, key, ct.GetMetadata().GetUid(), func(cur *apiv1.VirtualMachineSnapshotContent) bool {
		st := cur.GetStatus()
		phase := st.GetPhase()
		final := phase == apiv1.SnapshotSucceeded || phase == apiv1.SnapshotFailed
		held := slices.Contains(cur.GetMetadata().GetFinalizers(), apiv1.FinalizerSnapshotData)
		switch {
		case cur.GetMetadata().GetDeletionTimestamp() != nil || cur.GetSpec().GetAbandoned() || phase == apiv1.SnapshotFailed:
			if !held {
				return false
			}
			if !final {
				cur.Status = &apiv1.VirtualMachineSnapshotContentStatus{Phase: apiv1.SnapshotFailed, Error: "abandoned"}
			}
			// No data is kept: the finalizer goes at once.
			cur.Metadata.Finalizers = slices.DeleteFunc(cur.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerSnapshotData })
			return true
		case final:
			return false
		}
		src := cur.GetSpec().GetSource().GetMetadata()
		next := &apiv1.VirtualMachineSnapshotContentStatus{
			Phase: apiv1.SnapshotSucceeded, ReadyToUse: true, CreationTime: timestamppb.Now(),
			Indications: n.indications(apiv1.Ref(src.GetNamespace(), src.GetName())),
		}
		for _, vol := range cur.GetSpec().GetVolumes() {
			next.VolumeBackups = append(next.VolumeBackups, &apiv1.VolumeBackup{
				VolumeName: vol, Path: SnapshotPath(n.opts.Name, cur.GetMetadata().GetUid(), vol),
			})
		}
		cur.Status = next
		return true
	})
}

// indications are those of a snapshot of VM key: online when a guest of
// it runs here; the fake guests have no guest agent.
func (n *Node) indications(key string) []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, g := range n.guests {
		if g.key == key && g.span != nil {
			return []string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent}
		}
	}
	return nil
}

// handleRestore does the node's step for a restore as it now is.
func (n *Node) handleRestore(ctx context.Context, r *apiv1.VirtualMachineRestore) {
	key := &apiv1.ObjectKey{Namespace: r.GetMetadata().GetNamespace(), Name: r.GetMetadata().GetName()}
	n.updateRestore(ctx, key, r.GetMetadata().GetUid(), func(cur *apiv1.VirtualMachineRestore) bool {
		st := cur.GetStatus()
		switch phase := st.GetPhase(); {
		case cur.GetMetadata().GetDeletionTimestamp() != nil || phase == apiv1.RestoreFailed || phase == apiv1.RestoreSucceeded:
			if !slices.Contains(cur.GetMetadata().GetFinalizers(), apiv1.FinalizerRestoreData) {
				return false
			}
			cur.Metadata.Finalizers = slices.DeleteFunc(cur.Metadata.Finalizers, func(f string) bool { return f == apiv1.FinalizerRestoreData })
			return true
		case phase == apiv1.RestoreStaging && !st.GetStaged() && st.GetError() == "":
			st.Staged = true
			st.Message = "staged"
			return true
		case phase == apiv1.RestoreCommitting && !st.GetSwapped():
			st.Swapped = true
			st.Message = "swapped"
			return true
		}
		return false
	})
}

// updateContent applies fn to the stored content and writes it through
// UpdateStatus (status, and the data finalizer when fn dropped it),
// re-reading on a conflict; fn returns false when there is nothing to do.
func (n *Node) updateContent(ctx context.Context, key *apiv1.ObjectKey, uid string, fn func(*apiv1.VirtualMachineSnapshotContent) bool) {
	for ctx.Err() == nil {
		cur, err := n.c.SnapshotContents.Get(ctx, &apiv1.GetSnapshotContentRequest{Key: key})
		if err != nil || cur.GetMetadata().GetUid() != uid {
			return
		}
		next := proto.Clone(cur).(*apiv1.VirtualMachineSnapshotContent)
		if !fn(next) {
			return
		}
		_, err = n.c.SnapshotContents.UpdateStatus(ctx, &apiv1.UpdateSnapshotContentStatusRequest{Content: next})
		if status.Code(err) == codes.Aborted {
			continue
		}
		if err != nil && status.Code(err) != codes.NotFound {
			n.log.Warn("content status update failed", "content", key.Namespace+"/"+key.Name, "err", err)
		}
		return
	}
}

// updateRestore is updateContent for a restore.
func (n *Node) updateRestore(ctx context.Context, key *apiv1.ObjectKey, uid string, fn func(*apiv1.VirtualMachineRestore) bool) {
	for ctx.Err() == nil {
		cur, err := n.c.Restores.Get(ctx, &apiv1.GetRestoreRequest{Key: key})
		if err != nil || cur.GetMetadata().GetUid() != uid {
			return
		}
		next := proto.Clone(cur).(*apiv1.VirtualMachineRestore)
		if next.Status == nil {
			next.Status = &apiv1.VirtualMachineRestoreStatus{}
		}
		if !fn(next) {
			return
		}
		_, err = n.c.Restores.UpdateStatus(ctx, &apiv1.UpdateRestoreStatusRequest{Restore: next})
		if status.Code(err) == codes.Aborted {
			continue
		}
		if err != nil && status.Code(err) != codes.NotFound {
			n.log.Warn("restore status update failed", "restore", key.Namespace+"/"+key.Name, "err", err)
		}
		return
	}
}

func (n *Node) isDead() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dead
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
