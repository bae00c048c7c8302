package provider

import apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

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
