package apiv1

import "fmt"

// EvictionAction is what an eviction (a drain, or the Evict call) does
// with an instance.
type EvictionAction int

const (
	// EvictNothing: the instance has ended or is being deleted already.
	EvictNothing EvictionAction = iota
	// EvictShutdown: the instance is shut down (None, or
	// LiveMigrateIfPossible and not live-migratable); its run strategy
	// decides whether it starts again elsewhere.
	EvictShutdown
	// EvictMigrate: the instance is marked and live-migrated away.
	EvictMigrate
	// EvictExternal: the instance is marked and left to an outside actor.
	EvictExternal
	// EvictRefuse: LiveMigrate but not live-migratable; nothing may take
	// it down, so the eviction is refused and a drain waits.
	EvictRefuse
)

// Eviction decides what evicting vmi does, with clusterDefault standing
// for an unset strategy (KubeVirt's VMIMigratableOnEviction and the pod
// eviction admitter in one rule). It also returns the strategy in force
// and, for EvictRefuse, why the instance cannot migrate.
func Eviction(vmi *VirtualMachineInstance, clusterDefault string) (action EvictionAction, strategy, why string) {
	strategy = EffectiveEvictionStrategy(vmi.GetSpec(), clusterDefault)
	if IsFinal(vmi.GetStatus().GetPhase()) || vmi.GetMetadata().GetDeletionTimestamp() != nil {
		return EvictNothing, strategy, ""
	}
	// What the node reported, and what the spec alone decides (before the
	// node's first report).
	migratable := FindCondition(vmi.GetStatus().GetConditions(), ConditionLiveMigratable)
	if migratable.GetStatus() != ConditionFalse {
		migratable = LiveMigratable(vmi.GetSpec())
	}
	canMigrate := migratable.GetStatus() != ConditionFalse
	switch strategy {
	case EvictionStrategyLiveMigrate:
		if !canMigrate {
			return EvictRefuse, strategy, fmt.Sprintf("it is not live-migratable: %s (%s)", migratable.GetMessage(), migratable.GetReason())
		}
		return EvictMigrate, strategy, ""
	case EvictionStrategyLiveMigrateIfPossible:
		if !canMigrate {
			return EvictShutdown, strategy, ""
		}
		return EvictMigrate, strategy, ""
	case EvictionStrategyExternal:
		return EvictExternal, strategy, ""
	}
	return EvictShutdown, strategy, ""
}

// EffectiveEvictionStrategy is the spec's eviction strategy, else
// clusterDefault, else DefaultEvictionStrategy. Nil-safe.
func EffectiveEvictionStrategy(spec *VirtualMachineInstanceSpec, clusterDefault string) string {
	switch {
	case spec.GetEvictionStrategy() != "":
		return spec.GetEvictionStrategy()
	case clusterDefault != "":
		return clusterDefault
	}
	return DefaultEvictionStrategy
}

// Drained reports a node whose drain has ended: it drains and the
// evacuation controller found nothing left to move (an earlier drain's
// record never counts: Drain drops it). Nil-safe.
func (n *Node) Drained() bool {
	return n.GetSpec().GetDrain() && n.GetStatus().GetEvacuation().GetDrained()
}

// Describe is an evacuee in words, as the CLI and the provider show it:
// "default/web (LiveMigrate, Blocked: it is not live-migratable: ...)".
func (e *Evacuee) Describe() string {
	s := fmt.Sprintf("%s (%s, %s", Ref(e.GetNamespace(), e.GetName()), e.GetEvictionStrategy(), e.GetState())
	if e.GetMessage() != "" {
		s += ": " + e.GetMessage()
	}
	return s + ")"
}
