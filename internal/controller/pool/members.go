package pool

import (
	"cmp"
	"slices"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// member is one VM the pool controls, with what a pass needs to know of
// it.
type member struct {
	vm *apiv1.VirtualMachine
	// vmi is the VM's instance, nil when there is none (or the one of that
	// name belongs to an earlier VM).
	vmi *apiv1.VirtualMachineInstance
	// ordinal is N of <pool>-N; -1 for an owned VM named otherwise, which
	// this controller never makes (someone forged the owner reference).
	ordinal int
}

func (m member) key() string { return informer.Key(m.vm) }

func (m member) deleting() bool { return m.vm.GetMetadata().GetDeletionTimestamp() != nil }

// live reports an instance that runs or is on its way to: neither ended
// nor being deleted.
func (m member) live() bool {
	return m.vmi != nil && m.vmi.GetMetadata().GetDeletionTimestamp() == nil && !apiv1.IsFinal(m.vmi.GetStatus().GetPhase())
}

// strategy is the VM's effective run strategy; a VM that sets both
// fields (validation refuses it) counts as Halted, which the pool never
// restarts.
func (m member) strategy() string {
	s, err := m.vm.GetSpec().EffectiveRunStrategy()
	if err != nil {
		return apiv1.RunStrategyHalted
	}
	return s
}

// labelCurrent reports a VM already given the template of revision cur.
func (m member) labelCurrent(cur string) bool {
	return m.vm.GetMetadata().GetLabels()[apiv1.LabelPoolRevision] == cur
}

// staleInstance reports a live instance started from an older template
// that the VM controller will not stop by itself (a Halted VM's is
// stopped anyway, and starts from the VM's template next time).
func (m member) staleInstance(cur string) bool {
	return m.live() && m.vmi.GetMetadata().GetLabels()[apiv1.LabelPoolRevision] != cur && m.strategy() != apiv1.RunStrategyHalted
}

// outdated reports a VM the rollout still has to do something about.
func (m member) outdated(cur string) bool { return !m.labelCurrent(cur) || m.staleInstance(cur) }

// updated reports a VM on the current template: its label says so, and
// its instance, if it should have one, was started from it. A VM between
// the stop and the start of its restart is not updated yet, so
// status.updated_replicas reports real progress.
func (m member) updated(cur string) bool {
	if !m.labelCurrent(cur) {
		return false
	}
	if m.live() {
		return !m.staleInstance(cur)
	}
	return !m.shouldRun()
}

// shouldRun reports a VM without a live instance that the VM controller
// will start (KubeVirt's syncRunStrategy, in outline).
func (m member) shouldRun() bool {
	for _, r := range m.vm.GetStatus().GetStateChangeRequests() {
		if r.GetAction() == apiv1.StateChangeStart {
			return true
		}
	}
	switch m.strategy() {
	case apiv1.RunStrategyAlways:
		return true
	case apiv1.RunStrategyRerunOnFailure:
		if m.vmi == nil {
			return m.vm.GetStatus().GetRunStrategy() != apiv1.RunStrategyRerunOnFailure // its first run
		}
		return m.vmi.GetStatus().GetPhase() == apiv1.PhaseFailed
	case apiv1.RunStrategyOnce:
		return m.vmi == nil
	}
	return false
}

// ready reports a VM whose status says Ready=True, which the VM
// controller mirrors from its instance: status.ready_replicas.
func (m member) ready() bool {
	return apiv1.IsConditionTrue(m.vm.GetStatus().GetConditions(), apiv1.ConditionReady)
}

// available reports a VM serving now, read from its instance rather than
// the VM's mirror of it, which lags: running, Ready, and not due for a
// restart the rollout already decided on (its VM is current, the
// instance is not).
func (m member) available(cur string) bool {
	return m.live() && m.vmi.GetStatus().GetPhase() == apiv1.PhaseRunning &&
		apiv1.IsConditionTrue(m.vmi.GetStatus().GetConditions(), apiv1.ConditionReady) &&
		!(m.labelCurrent(cur) && m.staleInstance(cur))
}

// unavailable reports a VM that should serve and does not. A VM stopped
// on purpose (Halted, or Manual and stopped) is not counted: it would
// otherwise hold a rollout's budget forever.
func (m member) unavailable(cur string) bool {
	return !m.available(cur) && (m.live() || m.shouldRun())
}

// members returns the VMs pool controls, by ordinal, with their
// instances.
func (c *Controller) members(pool *apiv1.VirtualMachinePool) []member {
	uid := pool.GetMetadata().GetUid()
	if uid == "" {
		return nil // never stored so; "" would match forged references
	}
	vms := c.vms.ByIndex(ownerIndex, uid)
	out := make([]member, 0, len(vms))
	for _, vm := range vms {
		// The index holds VMs of every namespace; a uid is unique, but a
		// forged owner reference elsewhere must not count.
		if vm.GetMetadata().GetNamespace() != pool.GetMetadata().GetNamespace() {
			continue
		}
		m := member{vm: vm, ordinal: -1}
		if n, ok := apiv1.PoolOrdinal(pool.GetMetadata().GetName(), vm.GetMetadata().GetName()); ok {
			m.ordinal = n
		}
		if vmi, ok := c.vmis.GetByKey(informer.Key(vm)); ok && apiv1.IsControlledBy(vmi, vm) {
			m.vmi = vmi
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b member) int { return cmp.Compare(a.ordinal, b.ordinal) })
	return out
}
