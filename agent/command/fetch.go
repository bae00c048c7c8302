package command

import (
	"context"
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The helpers below call res's calls; errors are raw gRPC errors for
// describeError, or errNoCall for a call res does not have.

// errNoCall says that res has no call for verb: a kind that has other
// commands for it hands over before (getBy, deleteBy), so reaching this
// is a gap in the table, never a reason to try another kind's service.
func errNoCall(res *resource, verb string) error {
	return fmt.Errorf("%s has no %s call in the CLI's table of kinds", res.Kind, verb)
}

func getObject(ctx context.Context, c *client.Client, res *resource, namespace, name string) (object, error) {
	if res.calls.get == nil {
		return nil, errNoCall(res, "get")
	}
	return res.calls.get(ctx, c, &apiv1.ObjectKey{Namespace: namespace, Name: name})
}

// listObjects lists res in namespace (all of them for "") with the label
// selector.
func listObjects(ctx context.Context, c *client.Client, res *resource, namespace, selector string) ([]object, error) {
	if res.calls.list == nil {
		return nil, errNoCall(res, "list")
	}
	return res.calls.list(ctx, c, &apiv1.ListOptions{Namespace: namespace, LabelSelector: selector})
}

// watchObjects calls fn for every event until the stream ends (nil), fails,
// or fn returns an error (returned as is). obj is nil for RESET and SYNCED.
func watchObjects(ctx context.Context, c *client.Client, res *resource, opts *apiv1.WatchOptions, fn func(apiv1.EventType, object) error) error {
	if res.calls.watch == nil {
		return errNoCall(res, "watch")
	}
	return res.calls.watch(ctx, c, opts, fn)
}

// createObject and updateObject write an object (of res) apply read from
// a manifest.
func createObject(ctx context.Context, c *client.Client, res *resource, obj object) error {
	if res.calls.create == nil {
		return errNoCall(res, "create")
	}
	return res.calls.create(ctx, c, obj)
}

func updateObject(ctx context.Context, c *client.Client, res *resource, obj object) (object, error) {
	if res.calls.update == nil {
		return nil, errNoCall(res, "update")
	}
	return res.calls.update(ctx, c, obj)
}

// deleteObject deletes an object of res, a VM with its snapshots when
// withSnapshots, and returns what the server sent back.
func deleteObject(ctx context.Context, c *client.Client, res *resource, key *apiv1.ObjectKey, withSnapshots bool) (object, error) {
	del, verb := res.calls.delete, "delete"
	if withSnapshots {
		del, verb = res.calls.deleteWithSnapshots, "delete with snapshots"
	}
	if del == nil {
		return nil, errNoCall(res, verb)
	}
	return del(ctx, c, key)
}

// watchEvent is the event message of one kind's Watch stream.
type watchEvent[T object] interface {
	GetType() apiv1.EventType
	GetObject() T
}

// forEachEvent is watchObjects' loop over one kind's stream.
func forEachEvent[E watchEvent[T], T object](s client.Stream[E], fn func(apiv1.EventType, object) error) error {
	return client.EachEvent(s, func(ev E) error {
		obj, _ := nilSafe(ev.GetObject(), nil)
		return fn(ev.GetType(), obj)
	})
}

// nilSafe keeps a nil *T from becoming a non-nil object interface.
func nilSafe[T object](o T, err error) (object, error) {
	if err != nil || !o.ProtoReflect().IsValid() {
		return nil, err
	}
	return o, nil
}

func objects[T object](items []T) []object {
	out := make([]object, len(items))
	for i, it := range items {
		out[i] = it
	}
	return out
}
