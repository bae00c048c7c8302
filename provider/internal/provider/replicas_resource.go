package provider

import (
	"context"
	"maps"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// What the pool and replica set resources are made of: the two kinds go
// through create, read, update, delete and import alike, so they share
// one implementation (replicaResource, its operations in
// replicas_crud.go), and replicaOps holds what sets them apart. The
// family's model and errors, short, are here too.

// replicaResource is the part of a pool or replica set resource that
// does not depend on its kind: T is the kind's API object, V what a wait
// reads of it and its replicas, M the resource's state. The kind's type
// embeds it and adds its schema, checks and plan.
type replicaResource[T metaObject, V any, M any] struct {
	configuredResource
	ops replicaOps[T, V, M]
}

// newReplicaResource is the shared part of a resource of kind k.
func newReplicaResource[T metaObject, V any, M any](k objectKind, ops replicaOps[T, V, M]) replicaResource[T, V, M] {
	return replicaResource[T, V, M]{configuredResource: configuredResource{kind: k}, ops: ops}
}

// replicaOps is a replica kind as the shared operations use it.
type replicaOps[T metaObject, V any, M any] struct {
	// replicas is what the kind keeps, in messages ("VMs", "instances").
	replicas string

	// The agent's calls.
	create func(context.Context, *client.Client, T) (T, error)
	get    func(context.Context, *client.Client, *apiv1.ObjectKey) (T, error)
	update func(context.Context, *client.Client, T) (T, error)
	del    func(context.Context, *client.Client, *apiv1.ObjectKey, *apiv1.DeleteOptions) error

	// fromModel is the object a plan asks for, and merge applies it onto
	// the stored one (cur).
	fromModel func(context.Context, *M) (T, diag.Diagnostics)
	merge     func(cur, want T) T
	// settings are what the shared operations read of a plan or state.
	settings func(*M) replicaSettings
	// toState is the state that records v, with the provider-only
	// settings of prior (the plan or the previous state).
	toState func(v V, prior *M) (M, diag.Diagnostics)

	// view is an object as written, without its replicas.
	view func(T) V
	// refresh reads the replicas of the object read, for Read: one call,
	// never a wait.
	refresh func(context.Context, *client.Client, T) (V, error)
	// wait waits for the object as written (waitUntil) until judge says
	// done or fails, and returns what it read last.
	wait func(context.Context, *client.Client, T, func(V) verdict) (V, error)
	// judge decides whether a wait for t is over; describe says what v is
	// doing.
	judge    func(replicaTarget, V) verdict
	describe func(V) string
	// ready reports whether a wait for the object waits for its replicas
	// to be ready, not only there; targetText says in words what a wait
	// for t waits for.
	ready      func(T) bool
	targetText func(replicaTarget, T) string
}

// replicaSettings are what the shared operations read of a pool's or
// replica set's plan or state.
type replicaSettings struct {
	id, namespace, name, uid types.String
	waitForReady             types.Bool
	timeouts                 timeouts.Value
}

// waitForReadyOr is a state's wait_for_ready: as planned, or true (its
// default) where the state has none yet (after import).
func waitForReadyOr(b types.Bool) types.Bool {
	if b.IsNull() || b.IsUnknown() {
		return types.BoolValue(true)
	}
	return b
}

// ImportState imports a pool or replica set by namespace/name (or name in
// the default namespace).
func (r *replicaResource[T, V, M]) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	if importNamespaced(ctx, req, resp, r.kind, "default/web") {
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("wait_for_ready"), true)...)
	}
}

// The object types the pool and replica set models share.

// replicaStatusAttrTypes are the object types of the status attributes,
// with the names list under names.
func replicaStatusAttrTypes(names string, more map[string]attr.Type) map[string]attr.Type {
	out := map[string]attr.Type{
		"replicas":       types.Int64Type,
		"ready_replicas": types.Int64Type,
		"conditions":     types.ListType{ElemType: types.ObjectType{AttrTypes: conditionAttrTypes}},
		names:            types.ListType{ElemType: types.StringType},
	}
	maps.Copy(out, more)
	return out
}

// The attributes agent errors about the fields the pool and the replica
// set share land on.

// replicaAttributePath maps the fields outside the template that the pool
// and the replica set share.
func replicaAttributePath(field string) (path.Path, bool) {
	norm, args := normalizeFieldPath(field)
	switch {
	case norm == "metadata.name", norm == "metadata.namespace":
		return path.Root(strings.TrimPrefix(norm, "metadata.")), true
	case norm == "spec.replicas", norm == "spec.paused", norm == "spec.max_unavailable", norm == "spec.scale_in_order":
		return path.Root(strings.TrimPrefix(norm, "spec.")), true
	case strings.HasPrefix(norm, "spec.selector"):
		if len(args) > 0 {
			return path.Root("selector").AtMapKey(args[0]), true
		}
		return path.Root("selector"), true
	}
	return path.Empty(), false
}
