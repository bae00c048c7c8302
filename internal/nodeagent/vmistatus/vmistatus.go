// Package vmistatus writes what the node agent reports on a VMI: every
// role of the agent (the handler, the migration source and target, image
// pulls) changes the status through one Writer, which compares and swaps
// on the version read, never overwrites a final phase, and keeps messages
// within what the API accepts.
package vmistatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// API is what the writer needs of the VMI service: status writes with
// compare-and-swap, and a fresh read after a conflict.
type API interface {
	UpdateStatus(ctx context.Context, in *apiv1.UpdateVirtualMachineInstanceStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error)
	Get(ctx context.Context, in *apiv1.GetVirtualMachineInstanceRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error)
}

// Mutate changes a copy of the status (never nil) at now.
type Mutate func(st *apiv1.VirtualMachineInstanceStatus, now time.Time)

// ErrGone: the VMI was deleted or replaced by another of the same name
// while the agent wrote its status; there is nothing left to report to.
var ErrGone = errors.New("vmi gone or replaced")

// MaxAttempts bounds compare-and-swap retries; each retry means another
// writer got in first, so this only trips under a write storm.
const MaxAttempts = 10

// Writer writes VMI statuses.
type Writer struct {
	API   API
	Clock clock.PassiveClock
}

// Write applies mutate to the VMI's status and writes it with
// compare-and-swap on the version read. It starts from the cached copy and
// reads afresh after a conflict. A final phase is never overwritten (the
// node controller or a fence may have failed the VMI meanwhile), and
// nothing is written when mutate changes nothing.
func (w *Writer) Write(ctx context.Context, cached *apiv1.VirtualMachineInstance, mutate Mutate) (*apiv1.VirtualMachineInstance, error) {
	uid := cached.GetMetadata().GetUid()
	ns, name := cached.GetMetadata().GetNamespace(), cached.GetMetadata().GetName()
	key := apiv1.Ref(ns, name)
	cur := cached
	for range MaxAttempts {
		if cur.GetMetadata().GetUid() != uid {
			return nil, ErrGone
		}
		if apiv1.IsFinal(cur.GetStatus().GetPhase()) {
			return cur, nil
		}
		next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
		if next.Status == nil {
			next.Status = &apiv1.VirtualMachineInstanceStatus{}
		}
		mutate(next.Status, w.Clock.Now())
		clipMessages(next.Status)
		if proto.Equal(next.Status, cur.GetStatus()) {
			return cur, nil
		}
		out, err := w.API.UpdateStatus(ctx, &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: next})
		switch status.Code(err) {
		case codes.OK:
			return out, nil
		case codes.Aborted:
			cur, err = w.API.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
			if status.Code(err) == codes.NotFound {
				return nil, ErrGone
			}
			if err != nil {
				return nil, fmt.Errorf("reading vmi %s after a conflict: %w", key, err)
			}
		case codes.NotFound:
			return nil, ErrGone
		default:
			return nil, fmt.Errorf("writing status of vmi %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("writing status of vmi %s: still conflicting after %d attempts", key, MaxAttempts)
}

// Report is Write for callers with nothing to do when the VMI is gone:
// ErrGone is no error to them.
func (w *Writer) Report(ctx context.Context, cached *apiv1.VirtualMachineInstance, mutate Mutate) error {
	if _, err := w.Write(ctx, cached, mutate); err != nil && !errors.Is(err, ErrGone) {
		return err
	}
	return nil
}

// clipMessages keeps the messages of st within what the API accepts
// (validation.ClipStatusMessage): they quote libvirt and qemu-img, whose
// output is not ours to bound, and a status the API refused would leave
// the VMI showing nothing at all.
func clipMessages(st *apiv1.VirtualMachineInstanceStatus) {
	st.Message = validation.ClipStatusMessage(st.Message)
	for _, c := range st.Conditions {
		c.Message = validation.ClipStatusMessage(c.Message)
	}
	for _, v := range st.VolumeStatus {
		v.Message = validation.ClipStatusMessage(v.Message)
	}
}

// Final ends the VMI with phase (Succeeded or Failed).
func Final(phase, reason, message string) Mutate {
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		st.SetPhase(phase, now)
		st.Reason, st.Message = reason, message
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse, Reason: reason, Message: message,
		}, now)
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionPaused)
	}
}

// SyncFailed records that converging the domain failed
// (Synchronized=False, KubeVirt handleSyncError) and, with fail, fails the
// VMI: a guest that cannot start must not hang in Scheduled.
func SyncFailed(reason, message string, fail bool) Mutate {
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionSynchronized, Status: apiv1.ConditionFalse, Reason: reason, Message: message,
		}, now)
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionProvisioning)
		if fail {
			Final(apiv1.PhaseFailed, reason, message)(st, now)
		}
	}
}

// Provisioning sets Provisioning=True while a volume is created or an
// image pulled.
func Provisioning(msg string) Mutate {
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionProvisioning, Status: apiv1.ConditionTrue, Reason: "Provisioning", Message: msg,
		}, now)
	}
}
