package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// What the replica kinds' services (replicaset.go, pool.go) share beyond
// objects: Scale. Both follow vmService: the API defaults and validates,
// owns metadata and status, and counts spec changes in the generation;
// their controllers write the status and the finalizers through the
// store.

// scale is Scale of a replica kind: replicas points at spec.replicas of
// the current object (making its spec if it has none), which is set to
// the request's count. The write is a compare-and-swap retried on
// conflict, so the controller's status writes in between are kept and
// none of them is lost; a change counts in the generation, as Update's
// do.
func (o *objects[T, L, E]) scale(ctx context.Context, req *apiv1.ScaleRequest, replicas func(cur T) **int32) (T, error) {
	var none T
	ns, name, err := keyOf(req.GetKey())
	if err != nil {
		return none, err
	}
	n := req.GetReplicas()
	if errs := validation.ValidateReplicas(n, field.NewPath("replicas")); len(errs) > 0 {
		return none, validation.ToStatusError(o.kind, apiv1.Ref(ns, name), errs)
	}
	out, err := o.st.GuaranteedUpdate(ctx, ns, name, func(cur T) (T, error) {
		if r := replicas(cur); *r == nil || **r != n {
			v := n
			*r = &v
			cur.GetMetadata().Generation++
		}
		return cur, nil
	})
	if err != nil {
		return none, toStatus(err)
	}
	md := out.GetMetadata()
	o.log.Info(o.noun+" scaled", o.attr, apiv1.Ref(md.GetNamespace(), md.GetName()), "replicas", n)
	return out, nil
}
