package vmi

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// Reasons this controller writes.
const (
	// ReasonUnschedulable is kube-scheduler's PodScheduled=False reason.
	ReasonUnschedulable = "Unschedulable"
	// ReasonNodeDeleted: the VMI's node object is gone (KubeVirt: the
	// launcher pod is missing → Failed).
	ReasonNodeDeleted = "NodeDeleted"
)

// Reconcile converges one VMI. Every write is an Update against the
// cached resource version: a conflict means the cache is behind, and the
// error requeues the key until it has caught up, so a decision is never
// made twice from the same stale view.
func (c *Controller) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	v, ok := c.vmis.GetByKey(key)
	if !ok {
		c.assumed.forget(key)
		return controller.Result{}, nil
	}
	st := v.GetStatus()
	if apiv1.IsFinal(st.GetPhase()) {
		c.assumed.forget(key)
		return controller.Result{}, nil
	}
	if st.GetNodeName() != "" {
		c.assumed.forget(key)
		return c.checkNode(ctx, v)
	}
	if v.GetMetadata().GetDeletionTimestamp() != nil {
		// Nothing runs yet, so there is nothing to stop (KubeVirt:
		// unprocessed + deletionTimestamp → Failed).
		return controller.Result{}, c.fail(ctx, v, "", "deleted before it was placed on a node")
	}
	if !needsPlacement(v) {
		return controller.Result{}, nil
	}
	return c.place(ctx, key, v)
}

// checkNode fails a placed VMI whose node object no longer exists. The
// node cache is complete here: Run starts workers only after it synced.
func (c *Controller) checkNode(ctx context.Context, v *apiv1.VirtualMachineInstance) (controller.Result, error) {
	name := v.GetStatus().GetNodeName()
	if _, ok := c.nodes.Get("", name); ok {
		return controller.Result{}, nil
	}
	return controller.Result{}, c.fail(ctx, v, ReasonNodeDeleted, fmt.Sprintf("node %s no longer exists", name))
}

// place decides a node and writes it in one update.
func (c *Controller) place(ctx context.Context, key string, v *apiv1.VirtualMachineInstance) (controller.Result, error) {
	now := c.opts.Clock()
	uid := v.GetMetadata().GetUid()
	if r, ok := c.assumed.get(key, now); ok && r.uid == uid {
		// Placed already; the informer event that shows it requeues us.
		return controller.Result{}, nil
	}
	req, err := request(v.GetSpec(), c.opts)
	if err != nil {
		// The API validates guest memory, so this is a VMI written past
		// it; retrying will not help.
		return controller.Result{}, controller.TerminalError(fmt.Errorf("vmi %s: %w", key, err))
	}

	// Deciding and reserving happen under one lock so that two workers
	// cannot both see the same free capacity; the write itself happens
	// outside it, as kube-scheduler binds asynchronously after assuming.
	nd := needsOf(v.GetSpec(), req, v.GetSpec().GetNodeSelector(), requiredImages(v), c.opts.HostPolicy, c.opts.StorageClasses)
	if nd.refused == "" {
		nd.refused = namespaceRefusal(c.opts.Namespaces, v)
	}
	held := holdingsOf(v.GetSpec())
	c.placeMu.Lock()
	d := choose(nd, c.pullable, c.candidates(now, key, held))
	if d.node != "" {
		c.assumed.assume(key, reservation{uid: uid, node: d.node, req: req, held: held, at: now})
	}
	c.placeMu.Unlock()

	if d.node == "" {
		return controller.Result{RequeueAfter: c.opts.UnschedulableRetry}, c.markUnschedulable(ctx, v, d.message, now)
	}
	out := proto.Clone(v).(*apiv1.VirtualMachineInstance)
	if out.Metadata.Labels == nil {
		out.Metadata.Labels = map[string]string{}
	}
	out.Metadata.Labels[apiv1.LabelNodeName] = d.node
	st := status(out)
	st.NodeName = d.node
	st.SetPhase(apiv1.PhaseScheduled, now)
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: apiv1.ConditionPodScheduled, Status: apiv1.ConditionTrue,
	}, now)
	if _, err := c.store.Update(ctx, out); err != nil {
		// Whether or not the write landed, the next attempt decides
		// afresh: a landed write shows up in the cache (and makes the
		// stale retry conflict), a lost one must not keep capacity.
		c.assumed.forget(key)
		return controller.Result{}, fmt.Errorf("placing vmi %s on node %s: %w", key, d.node, err)
	}
	c.log.Info("placed", "vmi", key, "node", d.node, "milliCPU", req.milliCPU, "memory", req.memory)
	return controller.Result{}, nil
}

// candidates lists the nodes with what each already carries: the non-final
// VMIs placed on it (usage, from the informer's events) plus the
// reservations not counted there yet, and which of held (the placed
// VMI's MACs and host ports; its cache key is self) other instances hold
// there. Call it under placeMu: the result is the controller's buffer,
// good until the next call.
func (c *Controller) candidates(now time.Time, self string, held holdings) []candidate {
	pending := map[string]resources{}
	// node → MACs, host ports; only when there are any to look for.
	var macsInUse map[string][]string
	var portsInUse map[string][]validation.HostPort
	if len(held.macs) > 0 {
		macsInUse = map[string][]string{}
	}
	if len(held.ports) > 0 {
		portsInUse = map[string][]validation.HostPort{}
	}
	if macsInUse != nil || portsInUse != nil {
		c.usage.inUse(self, held, macsInUse, portsInUse)
	}
	for key, r := range c.assumed.snapshot(now) {
		// Counted by usage once the informer delivered the placement; not
		// at all once the VMI is gone, final or replaced by a new one of
		// the same name.
		if c.usage.counted(key, r.uid) {
			continue
		}
		cached, ok := c.vmis.GetByKey(key)
		if !ok || cached.GetMetadata().GetUid() != r.uid || apiv1.IsFinal(cached.GetStatus().GetPhase()) {
			continue
		}
		pending[r.node] = pending[r.node].plus(r.req)
		if key != self {
			c.pendingInUse(r, held, macsInUse, portsInUse)
		}
	}
	// choose breaks ties by name, so the order does not matter.
	c.nodeBuf = c.nodes.AppendUnsorted(c.nodeBuf[:0])
	out := c.candBuf[:0]
	for _, n := range c.nodeBuf {
		name := n.GetMetadata().GetName()
		cand := candidate{node: n, used: c.usage.onNode(name).plus(pending[name]),
			macsInUse: macsInUse[name], portsInUse: portsInUse[name]}
		// The reasons' order.
		slices.Sort(cand.macsInUse)
		slices.SortFunc(cand.portsInUse, validation.CompareHostPorts)
		out = append(out, cand)
	}
	c.candBuf = out
	return out
}

// pendingInUse adds to macsInUse and portsInUse (when not nil) those of
// held that reservation r, another instance's, holds on its node.
func (c *Controller) pendingInUse(r reservation, held holdings, macsInUse map[string][]string, portsInUse map[string][]validation.HostPort) {
	if macsInUse != nil {
		c.usage.macs.clashing(held.macs, r.held.macs, r.node, macsInUse)
	}
	if portsInUse != nil {
		c.usage.ports.clashing(held.ports, r.held.ports, r.node, portsInUse)
	}
}

// markUnschedulable records why the VMI fits nowhere, writing only when
// the message changed so that the periodic retry costs no writes.
func (c *Controller) markUnschedulable(ctx context.Context, v *apiv1.VirtualMachineInstance, msg string, now time.Time) error {
	cond := apiv1.FindCondition(v.GetStatus().GetConditions(), apiv1.ConditionPodScheduled)
	if v.GetStatus().GetPhase() == apiv1.PhasePending && cond.GetStatus() == apiv1.ConditionFalse &&
		cond.GetReason() == ReasonUnschedulable && cond.GetMessage() == msg {
		return nil
	}
	out := proto.Clone(v).(*apiv1.VirtualMachineInstance)
	st := status(out)
	st.SetPhase(apiv1.PhasePending, now)
	st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
		Type: apiv1.ConditionPodScheduled, Status: apiv1.ConditionFalse, Reason: ReasonUnschedulable, Message: msg,
	}, now)
	if _, err := c.store.Update(ctx, out); err != nil {
		return fmt.Errorf("recording unschedulable vmi %s: %w", informer.Key(v), err)
	}
	c.log.Info("unschedulable", "vmi", informer.Key(v), "message", msg)
	return nil
}

// fail moves the VMI to Failed.
func (c *Controller) fail(ctx context.Context, v *apiv1.VirtualMachineInstance, reason, msg string) error {
	now := c.opts.Clock()
	out := proto.Clone(v).(*apiv1.VirtualMachineInstance)
	st := status(out)
	st.SetPhase(apiv1.PhaseFailed, now)
	st.Reason, st.Message = reason, msg
	if _, err := c.store.Update(ctx, out); err != nil {
		return fmt.Errorf("failing vmi %s: %w", informer.Key(v), err)
	}
	c.log.Info("failed", "vmi", informer.Key(v), "reason", reason, "message", msg)
	return nil
}

func status(v *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstanceStatus {
	if v.Status == nil {
		v.Status = &apiv1.VirtualMachineInstanceStatus{}
	}
	return v.Status
}
