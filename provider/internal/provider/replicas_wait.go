package provider

import (
	"fmt"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What the waits for a pool and for a replica set share.

// controlledBy reports whether an object's controller owner reference
// is the owner of kind with uid.
func controlledBy(md *apiv1.ObjectMeta, kind, uid string) bool {
	for _, o := range md.GetOwnerReferences() {
		if o.GetController() {
			return uid != "" && o.GetKind() == kind && o.GetUid() == uid
		}
	}
	return false
}

// maxDescribed bounds the replicas a state description names.
const maxDescribed = 8

// replicaTarget is what a wait for a pool or replica set is for.
type replicaTarget struct {
	// generation is the one the controller must have acted on first, so
	// that a status from before the change is not taken for its result.
	generation int64
	// ready: the replicas must be ready, not only there (their run
	// strategy keeps them running).
	ready bool
}

// runsReplicas reports whether a VM spec's run strategy keeps its VMs
// running, so that a wait for them waits for them to be ready.
func runsReplicas(spec *apiv1.VirtualMachineSpec) bool {
	s := runStrategyOf(spec)
	return s == apiv1.RunStrategyAlways || s == apiv1.RunStrategyRerunOnFailure
}

// describeReplicas ends the state description of a pool or replica set:
// its replicas ("; VMs db-0 Running, db-1 (new)", label "VMs"), each as
// describe says, at most maxDescribed of them, then its conditions that
// are true.
func describeReplicas[R any](label string, replicas []R, describe func(R) string, conds []*apiv1.Condition) string {
	var s string
	var named []string
	for i, r := range replicas {
		if i == maxDescribed {
			named = append(named, fmt.Sprintf("and %d more", len(replicas)-i))
			break
		}
		named = append(named, describe(r))
	}
	if len(named) > 0 {
		s += "; " + label + " " + strings.Join(named, ", ")
	}
	for _, c := range conds {
		if c.GetStatus() == apiv1.ConditionTrue {
			s += fmt.Sprintf("; %s (%s): %s", c.GetType(), c.GetReason(), c.GetMessage())
		}
	}
	return s
}
