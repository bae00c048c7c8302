// Package fakenode is a scripted stand-in for the node agent, for
// integration tests and control-plane benchmarks: it registers a node,
// heartbeats, and moves the VMIs placed on it through phases as a script
// in their annotations says, without running any guest.
//
// Scripts (annotation fakenode.virtplane.io/script on the VM template):
//
//	""            run until stopped
//	"fail-start"  fail before ever running (a start failure)
//	"exit:2s"     run, then the guest powers off (Succeeded)
//	"crash:2s"    run, then crash (Failed)
//
// A deleted VMI is shut down after ShutdownDelay (Succeeded). Kill makes
// the node die: no more heartbeats or status; guests keep "running" until
// the node self-fences RestartElsewhere ones at its lease expiry.
//
// A running guest's interfaces are reported in status.interfaces: name and
// MAC from the spec, and an address (AddressFor the MAC, in 10.0.2.0/24)
// as annotation fakenode.virtplane.io/addresses says:
//
//	""                 at once (after Options.AddressDelay)
//	"after:3s"         three seconds after the guest started
//	"never"            never; info says why as the real node would
//	"never:some text"  never; info is "some text"
//
// The node advertises Options.Bridges and Options.Networks in its status,
// so that placement can be tested against them.
//
// Snapshot contents and restores labelled with the node get the node's
// part done at once, without disks (snapshots.go); hotpluggable volumes
// are Ready in a running guest's status as soon as they are in its spec
// (volumes.go).
package fakenode

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// AnnotationScript selects a VMI's scripted behaviour.
const AnnotationScript = "fakenode.virtplane.io/script"

// AnnotationAddresses scripts when a VMI's interfaces get their addresses.
const AnnotationAddresses = "fakenode.virtplane.io/addresses"

// Options describe the fake node.
type Options struct {
	Name string
	// Labels are the node's own, which it registers with: only under
	// node.virtplane.io/, as for any node (an admin sets the others).
	Labels        map[string]string
	CPU, Memory   string        // allocatable; default "4" and "16Gi"
	StartDelay    time.Duration // Scheduled → Running
	ShutdownDelay time.Duration // deletion → Succeeded
	// AddressDelay is how long after Running interfaces get their
	// addresses when the VMI's AnnotationAddresses does not say.
	AddressDelay time.Duration
	// Bridges and Networks are the node's network inventory
	// (NodeStatus.bridges and .networks).
	Bridges, Networks []string
	Logger            *slog.Logger
}

// Span is one interval during which the node ran a copy of a VMI.
type Span struct {
	Key, UID, Node string
	Start, End     time.Time // End is zero while it runs
}

// Node is a running fake node agent.
type Node struct {
	opts   Options
	c      *client.Client
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	dead     bool
	leaseEnd time.Time         // from the last acknowledged heartbeat
	guests   map[string]*guest // by VMI uid
	spans    []*Span           //
	leaseDur time.Duration     //
	lastSeen map[string]*apiv1.VirtualMachineInstance
}

type guest struct {
	key, uid string
	policy   string
	span     *Span
	timer    *time.Timer
}

// Start registers the node and starts heartbeating and handling VMIs.
func Start(ctx context.Context, c *client.Client, o Options) (*Node, error) {
	if o.CPU == "" {
		o.CPU = "4"
	}
	if o.Memory == "" {
		o.Memory = "16Gi"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	n := &Node{opts: o, c: c, log: o.Logger.With("fakenode", o.Name),
		guests: map[string]*guest{}, lastSeen: map[string]*apiv1.VirtualMachineInstance{}}
	res := map[string]string{"cpu": o.CPU, "memory": o.Memory}
	if _, err := c.Nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: o.Name, Labels: o.Labels},
		Status: &apiv1.NodeStatus{Capacity: res, Allocatable: res, Schedulable: true,
			NodeInfo: &apiv1.NodeInfo{Hostname: o.Name, AgentVersion: "fake"},
			Bridges:  o.Bridges, Networks: o.Networks},
	}}); err != nil {
		return nil, fmt.Errorf("registering fake node %s: %w", o.Name, err)
	}
	hb, err := n.heartbeat(ctx)
	if err != nil {
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	n.wg.Add(4)
	go func() { defer n.wg.Done(); n.heartbeatLoop(rctx, hb) }()
	go func() { defer n.wg.Done(); n.watchLoop(rctx) }()
	go func() { defer n.wg.Done(); n.contentLoop(rctx) }()
	go func() { defer n.wg.Done(); n.restoreLoop(rctx) }()
	return n, nil
}

func (n *Node) heartbeat(ctx context.Context) (time.Duration, error) {
	sent := time.Now()
	resp, err := n.c.Nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: n.opts.Name, Schedulable: true})
	if err != nil {
		return 0, fmt.Errorf("heartbeat: %w", err)
	}
	n.mu.Lock()
	n.leaseDur = time.Duration(resp.LeaseDurationSeconds) * time.Second
	// The lease runs from when we sent the beat, on our own clock.
	n.leaseEnd = sent.Add(n.leaseDur)
	n.mu.Unlock()
	return time.Duration(resp.HeartbeatIntervalSeconds) * time.Second, nil
}

func (n *Node) heartbeatLoop(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := n.heartbeat(ctx); err != nil && ctx.Err() == nil {
				n.log.Warn("heartbeat failed", "err", err)
			}
		}
	}
}

func (n *Node) watchLoop(ctx context.Context) {
	for ctx.Err() == nil {
		w, err := n.c.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: &apiv1.WatchOptions{
			LabelSelector: apiv1.LabelNodeName + "=" + n.opts.Name,
		}})
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		for {
			ev, err := w.Recv()
			if err != nil {
				break
			}
			if ev.Object != nil {
				n.handle(ctx, ev.Type, ev.Object)
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *Node) handle(ctx context.Context, typ apiv1.EventType, vmi *apiv1.VirtualMachineInstance) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.dead {
		return
	}
	uid := vmi.Metadata.Uid
	key := apiv1.Ref(vmi.Metadata.Namespace, vmi.Metadata.Name)
	g := n.guests[uid]
	if typ == apiv1.EventType_DELETED {
		if g != nil {
			n.stopGuest(g)
		}
		return
	}
	n.lastSeen[uid] = vmi
	phase := vmi.GetStatus().GetPhase()
	if apiv1.IsFinal(phase) {
		if g != nil {
			n.stopGuest(g)
		}
		return
	}
	if vmi.Metadata.DeletionTimestamp != nil {
		if g != nil && g.timer != nil {
			g.timer.Stop()
		}
		n.after(n.opts.ShutdownDelay, func() { n.finish(ctx, key, uid, apiv1.PhaseSucceeded, "GuestShutdown") })
		return
	}
	if phase == apiv1.PhaseScheduled && g == nil {
		script := vmi.Metadata.Annotations[AnnotationScript]
		g = &guest{key: key, uid: uid, policy: vmi.Metadata.Annotations[apiv1.AnnotationNodeFailurePolicy]}
		n.guests[uid] = g
		ifaces := guestInterfaces(vmi)
		addrs := vmi.Metadata.Annotations[AnnotationAddresses]
		n.after(n.opts.StartDelay, func() { n.boot(ctx, g, script, ifaces, addrs) })
	}
	if g != nil && phase == apiv1.PhaseRunning {
		n.syncPaused(ctx, vmi)
		n.syncVolumes(ctx, vmi)
	}
}

// after runs fn later unless the node died meanwhile.
func (n *Node) after(d time.Duration, fn func()) {
	time.AfterFunc(d, func() {
		n.mu.Lock()
		dead := n.dead
		n.mu.Unlock()
		if !dead {
			fn()
		}
	})
}

func (n *Node) boot(ctx context.Context, g *guest, script string, ifaces []guestInterface, addrScript string) {
	action, arg, _ := strings.Cut(script, ":")
	if action == "fail-start" {
		n.finish(ctx, g.key, g.uid, apiv1.PhaseFailed, "LauncherFailed")
		return
	}
	plan := parseAddressScript(addrScript, n.opts.AddressDelay)
	ok := n.setStatus(ctx, g.key, g.uid, func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		st.SetPhase(apiv1.PhaseRunning, now)
		st.Reason = ""
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: "GuestRunning"}, now)
		// Addresses due at once ride on this write.
		st.Interfaces = interfaceStatuses(ifaces, plan, !plan.never && plan.delay <= 0)
	})
	if !ok {
		return
	}
	if !plan.never && plan.delay > 0 {
		n.after(plan.delay, func() {
			n.setStatus(ctx, g.key, g.uid, func(st *apiv1.VirtualMachineInstanceStatus, _ time.Time) {
				if st.Phase == apiv1.PhaseRunning {
					st.Interfaces = interfaceStatuses(ifaces, plan, true)
				}
			})
		})
	}
	n.mu.Lock()
	g.span = &Span{Key: g.key, UID: g.uid, Node: n.opts.Name, Start: time.Now()}
	n.spans = append(n.spans, g.span)
	n.mu.Unlock()
	d, err := time.ParseDuration(arg)
	if err != nil {
		return
	}
	switch action {
	case "exit":
		n.after(d, func() { n.finish(ctx, g.key, g.uid, apiv1.PhaseSucceeded, "GuestShutdown") })
	case "crash":
		n.after(d, func() { n.finish(ctx, g.key, g.uid, apiv1.PhaseFailed, "GuestCrashed") })
	}
}

func (n *Node) syncPaused(ctx context.Context, vmi *apiv1.VirtualMachineInstance) {
	want := vmi.GetSpec().GetPaused()
	have := apiv1.IsConditionTrue(vmi.GetStatus().GetConditions(), apiv1.ConditionPaused)
	if want == have {
		return
	}
	key, uid := vmi.Metadata.Namespace+"/"+vmi.Metadata.Name, vmi.Metadata.Uid
	go n.setStatus(ctx, key, uid, func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		if want {
			st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
				Type: apiv1.ConditionPaused, Status: apiv1.ConditionTrue, Reason: "PausedByUser"}, now)
		} else {
			st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionPaused)
		}
	})
}

func (n *Node) finish(ctx context.Context, key, uid, phase, reason string) {
	n.setStatus(ctx, key, uid, func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		st.SetPhase(phase, now)
		st.Reason = reason
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReady, Status: apiv1.ConditionFalse, Reason: "GuestNotRunning"}, now)
	})
	n.mu.Lock()
	if g := n.guests[uid]; g != nil {
		n.stopGuest(g)
	}
	n.mu.Unlock()
}

// stopGuest records the end of a guest; the caller holds n.mu.
func (n *Node) stopGuest(g *guest) {
	if g.span != nil && g.span.End.IsZero() {
		g.span.End = time.Now()
	}
	delete(n.guests, g.uid)
}

// setStatus applies fn to the VMI's status with compare-and-swap retries;
// false when the VMI is gone or was replaced.
func (n *Node) setStatus(ctx context.Context, key, uid string, fn func(*apiv1.VirtualMachineInstanceStatus, time.Time)) bool {
	ns, name, _ := strings.Cut(key, "/")
	for ctx.Err() == nil {
		cur, err := n.c.VMIs.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
		if err != nil || cur.Metadata.Uid != uid {
			return false
		}
		next := proto.Clone(cur).(*apiv1.VirtualMachineInstance)
		if next.Status == nil {
			next.Status = &apiv1.VirtualMachineInstanceStatus{}
		}
		if apiv1.IsFinal(next.Status.Phase) {
			return false // fenced or failed elsewhere meanwhile
		}
		fn(next.Status, time.Now())
		_, err = n.c.VMIs.UpdateStatus(ctx, &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: next})
		if status.Code(err) == codes.Aborted {
			continue
		}
		if err != nil {
			n.log.Warn("status update failed", "vmi", key, "err", err)
			return false
		}
		return true
	}
	return false
}

// Kill makes the node die: heartbeats and status updates stop. Guests of
// RestartElsewhere VMs are destroyed at the lease expiry (self-fencing);
// others keep running, as QEMU would.
func (n *Node) Kill() {
	n.mu.Lock()
	n.dead = true
	fenceAt := n.leaseEnd
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
	time.AfterFunc(time.Until(fenceAt), func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		for _, g := range n.guests {
			if g.policy == apiv1.NodeFailurePolicyRestartElsewhere {
				n.log.Info("self-fencing guest at lease expiry", "vmi", g.key)
				n.stopGuest(g)
			}
		}
	})
}

// Stop ends the fake node and everything it runs (test cleanup).
func (n *Node) Stop() {
	n.mu.Lock()
	n.dead = true
	for _, g := range n.guests {
		n.stopGuest(g)
	}
	n.mu.Unlock()
	n.cancel()
	n.wg.Wait()
}

// Spans returns copies of the run intervals so far.
func (n *Node) Spans() []Span {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]Span, 0, len(n.spans))
	for _, s := range n.spans {
		out = append(out, *s)
	}
	return out
}

// Overlap reports a moment when two spans of the same VMI key ran at once.
func Overlap(spans []Span) error {
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if a.Key != b.Key || a.UID == b.UID {
				continue
			}
			aEnd, bEnd := a.End, b.End
			if aEnd.IsZero() {
				aEnd = time.Now()
			}
			if bEnd.IsZero() {
				bEnd = time.Now()
			}
			if a.Start.Before(bEnd) && b.Start.Before(aEnd) {
				return fmt.Errorf("%s ran on %s (%v–%v) and on %s (%v–%v) at once", a.Key,
					a.Node, a.Start.Format(time.StampMilli), aEnd.Format(time.StampMilli),
					b.Node, b.Start.Format(time.StampMilli), bEnd.Format(time.StampMilli))
			}
		}
	}
	return nil
}
