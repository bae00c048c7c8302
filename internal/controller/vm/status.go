package vm

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Crash-loop backoff constants (KubeVirt defaultMaxCrashLoopBackoffDelaySeconds).
const (
	maxBackoff      = 300 * time.Second
	backoffInterval = 10 * time.Second // max(maxBackoff/30, 10 s)
)

// StartBackoff is the delay after the n-th consecutive start failure:
// 10 s × n², plus up to 50 % jitter (r in [0,1)), capped at 300 s.
func StartBackoff(n int32, r float64) time.Duration {
	if n <= 0 {
		return 0
	}
	d := backoffInterval * time.Duration(int64(n)*int64(n))
	if d > maxBackoff || d <= 0 {
		return maxBackoff
	}
	d += time.Duration(r * float64(d) / 2)
	return min(d, maxBackoff)
}

// updateStatus computes the VM status from what was observed and the sync
// result, hands over final VMIs, and writes the VM if it changed.
func (c *Controller) updateStatus(ctx context.Context, key string, old, next *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, syncErr error) error {
	st := next.Status
	now := c.opts.Clock()
	strategy := runStrategy(next)

	st.Created = vmi != nil
	if vmi != nil {
		// Written only once an instance existed, so RerunOnFailure can tell
		// "just switched to me" from "ran and finished".
		st.RunStrategy = strategy
		if g, err := strconv.ParseInt(vmi.GetMetadata().GetAnnotations()[apiv1.AnnotationVMGeneration], 10, 64); err == nil {
			st.ObservedGeneration = g
		}
	}
	st.DesiredGeneration = next.Metadata.Generation

	c.syncStartFailure(st, vmi, strategy, now)
	trimRequests(st, vmi)
	c.syncConditions(next, vmi, syncErr, now)
	ready := apiv1.FindCondition(vmi.GetStatus().GetConditions(), apiv1.ConditionReady)
	st.Ready = vmi != nil && ready.GetStatus() == apiv1.ConditionTrue && !apiv1.IsFinal(vmi.GetStatus().GetPhase())
	adds, dels := c.exp.Pending(key)
	st.PrintableStatus = PrintableStatus(next, vmi, adds > 0, dels > 0)

	if n := vmi.GetStatus().GetNodeName(); n != "" && n != st.NodeName {
		// A VM with local persistent volumes is pinned to the node that holds
		// them, so that node is written at once; for others it rides
		// along with the next write (placement alone costs no VM write).
		if hasLocalVolumes(next) || !proto.Equal(old, next) {
			st.NodeName = n
		}
	}
	if proto.Equal(old, next) {
		return nil
	}
	out, err := c.vmSt.Update(ctx, next)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err // a conflict requeues; the cache will show the newer VM
	}
	c.writes.Wrote(key, out.Metadata.ResourceVersion)
	return nil
}

// syncStartFailure counts instances that ended without ever running and
// sets the retry time (KubeVirt syncStartFailureStatus).
func (c *Controller) syncStartFailure(st *apiv1.VirtualMachineStatus, vmi *apiv1.VirtualMachineInstance, strategy string, now time.Time) {
	switch strategy {
	case apiv1.RunStrategyAlways, apiv1.RunStrategyRerunOnFailure, apiv1.RunStrategyOnce:
	default:
		st.StartFailure = nil
		return
	}
	if vmi == nil {
		return
	}
	if everRan(vmi) {
		st.StartFailure = nil
		return
	}
	if !apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		return
	}
	sf := st.StartFailure
	if sf != nil && sf.LastFailedVmiUid == vmi.Metadata.Uid {
		return // counted already
	}
	if sf == nil {
		sf = &apiv1.VirtualMachineStartFailure{}
	} else {
		sf = proto.Clone(sf).(*apiv1.VirtualMachineStartFailure)
	}
	sf.ConsecutiveFailCount++
	sf.LastFailedVmiUid = vmi.Metadata.Uid
	sf.LastFailureReason, sf.LastFailureMessage = failureCause(vmi)
	r := rand.Float64()
	if c.opts.Rand != nil {
		r = c.opts.Rand()
	}
	sf.RetryAfterTimestamp = timestamppb.New(now.Add(StartBackoff(sf.ConsecutiveFailCount, r)))
	st.StartFailure = sf
}

func everRan(vmi *apiv1.VirtualMachineInstance) bool {
	if vmi.GetStatus().GetPhase() == apiv1.PhaseRunning {
		return true
	}
	for _, t := range vmi.GetStatus().GetPhaseTransitionTimestamps() {
		if t.GetPhase() == apiv1.PhaseRunning {
			return true
		}
	}
	return false
}

// trimRequests pops the head state-change request once it is done
// (KubeVirt isTrimFirstChangeRequestNeeded).
func trimRequests(st *apiv1.VirtualMachineStatus, vmi *apiv1.VirtualMachineInstance) {
	r := firstRequest(st)
	if r == nil {
		return
	}
	done := false
	switch r.Action {
	case apiv1.StateChangeStop:
		done = vmi == nil || r.Uid == "" || vmi.Metadata.Uid != r.Uid
	case apiv1.StateChangeStart:
		done = vmi != nil && vmi.Metadata.DeletionTimestamp == nil && !apiv1.IsFinal(vmi.GetStatus().GetPhase())
	}
	if done {
		st.StateChangeRequests = st.StateChangeRequests[1:]
		if len(st.StateChangeRequests) == 0 {
			st.StateChangeRequests = nil
		}
	}
}

// failureCause is why a VMI failed: its status reason and message, or
// those of a False Synchronized condition (a node's sync error, such as
// libvirt refusing to start the domain).
func failureCause(vmi *apiv1.VirtualMachineInstance) (string, string) {
	st := vmi.GetStatus()
	reason, msg := st.GetReason(), st.GetMessage()
	if c := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionSynchronized); c.GetStatus() == apiv1.ConditionFalse {
		if reason == "" {
			reason = c.GetReason()
		}
		if msg == "" {
			msg = c.GetMessage()
		}
	}
	return reason, msg
}
