package apiserver

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/eviction"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Evict is the voluntary-disruption gate (KubeVirt's pod eviction
// admitter): it shuts the instance down only when its eviction strategy
// allows that; otherwise it marks the instance for evacuation and refuses
// with ResourceExhausted (Kubernetes' 429), so that a caller retries until
// the instance has left. An instance that has ended or is being deleted
// is evicted already.
func (v *vmiService) Evict(ctx context.Context, req *apiv1.EvictVirtualMachineInstanceRequest) (*apiv1.VirtualMachineInstance, error) {
	ns, name, err := keyOf(req.GetKey())
	if err != nil {
		return nil, err
	}
	vmi, err := v.st.Get(ctx, ns, name)
	if err != nil {
		return nil, toStatus(err)
	}
	ref := apiv1.Ref(ns, name)
	action, strategy, why := apiv1.Eviction(vmi, v.s.opts.DefaultEvictionStrategy)
	node := vmi.GetStatus().GetNodeName()
	switch action {
	case apiv1.EvictNothing:
		return vmi, nil
	case apiv1.EvictRefuse:
		return nil, evictionRefused(apiv1.ReasonDisruptionBudget,
			fmt.Sprintf("instance %s may not be shut down (eviction strategy %s) and cannot migrate: %s", ref, strategy, why))
	case apiv1.EvictShutdown:
		if req.GetDryRun() {
			return vmi, nil
		}
		if err := eviction.Shutdown(ctx, v.st, vmi); err != nil {
			return nil, toStatus(err)
		}
		v.s.log.Info("instance evicted", "vmi", ref, "node", node, "eviction_strategy", strategy)
		out, err := v.st.Get(ctx, ns, name)
		if errors.Is(err, store.ErrNotFound) {
			return vmi, nil // gone already: nothing held it
		}
		return out, toStatus(err)
	}
	// EvictMigrate, EvictExternal: mark and refuse, as KubeVirt does.
	if node == "" {
		return nil, status.Errorf(codes.FailedPrecondition, "instance %s is not on a node yet; nothing to evacuate", ref)
	}
	if !req.GetDryRun() {
		if _, err := eviction.Mark(ctx, v.st, vmi); err != nil {
			return nil, toStatus(err)
		}
	}
	how := "it leaves by live migration"
	if action == apiv1.EvictExternal {
		how = "an outside actor has to move it (eviction strategy External)"
	}
	return nil, evictionRefused(apiv1.ReasonEvictionTriggeredEvacuation,
		fmt.Sprintf("Eviction triggered evacuation of instance %s from node %s: %s", ref, node, how))
}

// evictionRefused is ResourceExhausted (Kubernetes' 429) with the
// ErrorInfo that tells clients why: apiv1.ReasonDisruptionBudget or
// apiv1.ReasonEvictionTriggeredEvacuation.
func evictionRefused(reason, msg string) error {
	return withReason(codes.ResourceExhausted, reason, msg)
}
