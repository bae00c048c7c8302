package provider

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Waiting for a pool: its VMs made, ready and on the current template
// (the rollout done), or a reason they cannot get there. The judgement
// (judgePool) is a pure function of what readPool read.

// poolView is a pool and its VMs, as a wait reads them.
type poolView struct {
	pool *apiv1.VirtualMachinePool
	// vms are the pool's VMs by ordinal, each with its instance when the
	// VM is in trouble (judgeVM's messages quote it), else without.
	vms []vmView
}

// readPool reads pool ns/name, its VMs, and the instances of those in
// trouble.
func readPool(ctx context.Context, c *client.Client, ns, name string) (poolView, error) {
	p, err := c.Pools.Get(ctx, &apiv1.GetPoolRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
	if err != nil {
		return poolView{}, err
	}
	vms, err := poolVMs(ctx, c, p)
	if err != nil {
		return poolView{}, err
	}
	v := poolView{pool: p}
	for _, vm := range vms {
		view := vmView{vm: vm}
		if vmInTrouble(vm) {
			_, vmi, err := getVM(ctx, c, ns, vm.GetMetadata().GetName())
			if err != nil && status.Code(err) != codes.NotFound {
				return poolView{}, err
			}
			view.vmi = vmi
		}
		v.vms = append(v.vms, view)
	}
	return v, nil
}

// vmInTrouble reports a VM whose state judgeVM reports as a failure.
func vmInTrouble(vm *apiv1.VirtualMachine) bool {
	switch vm.GetStatus().GetPrintableStatus() {
	case apiv1.PrintableErrorUnschedulable, apiv1.PrintableCrashLoopBackOff, apiv1.PrintableDataVolumeError:
		return true
	}
	return apiv1.IsConditionTrue(vm.GetStatus().GetConditions(), apiv1.ConditionFailure)
}

// poolVMs lists the VMs pool p controls, by ordinal (others last, by
// name): those its selector matches in its namespace whose controller is
// p (by uid, so a VM of an earlier pool of the same name is not).
func poolVMs(ctx context.Context, c *client.Client, p *apiv1.VirtualMachinePool) ([]*apiv1.VirtualMachine, error) {
	md := p.GetMetadata()
	list, _, err := client.ListAll(ctx, &apiv1.ListOptions{
		Namespace: md.GetNamespace(), LabelSelector: apiv1.SelectorString(p.GetSpec().GetSelector()),
	}, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListVirtualMachinesResponse, error) {
		return c.VMs.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: o})
	})
	if err != nil {
		return nil, err
	}
	var out []*apiv1.VirtualMachine
	for _, vm := range list {
		if controlledBy(vm.GetMetadata(), apiv1.KindPool, md.GetUid()) {
			out = append(out, vm)
		}
	}
	ordinal := func(vm *apiv1.VirtualMachine) int {
		if n, ok := apiv1.PoolOrdinal(md.GetName(), vm.GetMetadata().GetName()); ok {
			return n
		}
		return int(^uint(0) >> 1)
	}
	slices.SortFunc(out, func(a, b *apiv1.VirtualMachine) int {
		return cmp.Or(cmp.Compare(ordinal(a), ordinal(b)), cmp.Compare(a.GetMetadata().GetName(), b.GetMetadata().GetName()))
	})
	return out, nil
}

// judgePool decides whether the pool has reached t: the controller has
// acted on t.generation, the pool has replicas VMs, all on its current
// template (status.template_generation caught up: the rollout is done),
// and ready when t.ready. It fails when the controller reports a failure
// (ReplicaFailure) or a VM cannot run (judgeVM: no fitting node, crash
// loop, ...). A paused pool is done once the controller has seen the
// change: it makes, updates and removes nothing while paused.
func judgePool(t replicaTarget, v poolView) verdict {
	p := v.pool
	st := p.GetStatus()
	out := verdict{state: describePool(v)}
	if st.GetObservedGeneration() < t.generation {
		return out
	}
	if f := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionReplicaFailure); f.GetStatus() == apiv1.ConditionTrue {
		out.err = fmt.Errorf("the pool controller reports %s: %s", f.GetReason(), f.GetMessage())
		return out
	}
	for _, m := range v.vms {
		if m.vm.GetMetadata().GetDeletionTimestamp() != nil {
			continue
		}
		j := judgeVM(waitTarget{strategy: runStrategyOf(m.vm.GetSpec())}, m.vm, m.vmi)
		if j.err != nil {
			out.err = fmt.Errorf("VM %s cannot run: %w", m.vm.GetMetadata().GetName(), j.err)
			return out
		}
	}
	if p.GetSpec().GetPaused() {
		out.done = true
		return out
	}
	want := p.GetSpec().DesiredReplicas()
	out.done = st.GetReplicas() == want && st.GetUpdatedReplicas() == want && st.GetTemplateGeneration() >= t.generation &&
		(!t.ready || st.GetReadyReplicas() == want)
	return out
}

// describePool renders what the pool is doing: its counts and its VMs'
// printable statuses.
func describePool(v poolView) string {
	p := v.pool
	st := p.GetStatus()
	s := fmt.Sprintf("%d of %d VMs, %d ready, %d on the current template (template generation %d, generation %d)",
		st.GetReplicas(), p.GetSpec().DesiredReplicas(), st.GetReadyReplicas(), st.GetUpdatedReplicas(),
		st.GetTemplateGeneration(), p.GetMetadata().GetGeneration())
	if p.GetSpec().GetPaused() {
		s += ", paused"
	}
	return s + describeReplicas("VMs", v.vms, func(m vmView) string {
		return m.vm.GetMetadata().GetName() + " " + cmp.Or(m.vm.GetStatus().GetPrintableStatus(), "(new)")
	}, st.GetConditions())
}

// poolChanges signals whenever the pool or one of the VMs its selector
// matches changes, until ctx ends.
func poolChanges(ctx context.Context, c *client.Client, p *apiv1.VirtualMachinePool) <-chan struct{} {
	ch, notify := notifier()
	md := p.GetMetadata()
	notifyOnEvents(ctx, notify, func(ctx context.Context) (apiv1.Pools_WatchClient, error) {
		return c.Pools.Watch(ctx, &apiv1.WatchPoolsRequest{Options: &apiv1.WatchOptions{Namespace: md.GetNamespace(), Name: md.GetName()}})
	})
	notifyOnEvents(ctx, notify, func(ctx context.Context) (apiv1.VirtualMachines_WatchClient, error) {
		return c.VMs.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: &apiv1.WatchOptions{
			Namespace: md.GetNamespace(), LabelSelector: apiv1.SelectorString(p.GetSpec().GetSelector()),
		}})
	})
	return ch
}

// waitPool waits until judge says done or fails, or ctx ends (waitUntil),
// and returns what it read last. p is the pool as written.
func waitPool(ctx context.Context, c *client.Client, p *apiv1.VirtualMachinePool, judge func(poolView) verdict) (poolView, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ns, name := p.GetMetadata().GetNamespace(), p.GetMetadata().GetName()
	return waitUntil(ctx, "pool "+apiv1.Ref(ns, name), poolChanges(wctx, c, p),
		func(ctx context.Context) (poolView, error) { return readPool(ctx, c, ns, name) }, judge)
}

// poolTargetDescription says in words what a wait for t waits for.
func poolTargetDescription(t replicaTarget, p *apiv1.VirtualMachinePool) string {
	n := p.GetSpec().DesiredReplicas()
	if p.GetSpec().GetPaused() {
		return "to be seen by its controller (paused)"
	}
	ready := ""
	if t.ready {
		ready = " ready"
	}
	return fmt.Sprintf("to have %d%s VMs on its current template", n, ready)
}
