package command

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// kind is an entry of kinds as it is written: its calls over its own
// request and response types (T its object, E its watch event), which
// define turns into the resource's calls on objects. A call left nil is
// one the kind does not have.
type kind[T object, E watchEvent[T]] struct {
	resource
	row  func(o T, now time.Time) []string
	wide func(o T) []string

	get   func(context.Context, *client.Client, *apiv1.ObjectKey) (T, error)
	list  func(context.Context, *client.Client, *apiv1.ListOptions) ([]T, error)
	watch func(context.Context, *client.Client, *apiv1.WatchOptions) (client.Stream[E], error)
	// create and update (or specDefaults) make a kind one apply takes.
	create func(context.Context, *client.Client, T) (T, error)
	update func(context.Context, *client.Client, T) (T, error)
	// specDefaults is objectCalls.specDefaults: set instead of update for
	// a kind whose spec cannot change.
	specDefaults        func(o T)
	delete              func(context.Context, *client.Client, *apiv1.ObjectKey) (T, error)
	deleteWithSnapshots func(context.Context, *client.Client, *apiv1.ObjectKey) (T, error)
	deleted             func(name string, o T) string
	scale               func(context.Context, *client.Client, *apiv1.ScaleRequest) (T, error)
}

// define makes the resource of k.
func (k kind[T, E]) define() *resource {
	r := new(resource)
	*r = k.resource
	c := &r.calls
	c.newObject = func() object {
		var zero T
		return zero.ProtoReflect().Type().New().Interface().(object)
	}
	if k.row != nil {
		c.row = func(obj object, now time.Time) []string { return k.row(obj.(T), now) }
	}
	if k.wide != nil {
		c.wide = func(obj object) []string { return k.wide(obj.(T)) }
	}
	if k.get != nil {
		c.get = func(ctx context.Context, cl *client.Client, key *apiv1.ObjectKey) (object, error) {
			return nilSafe(k.get(ctx, cl, key))
		}
	}
	if k.list != nil {
		c.list = func(ctx context.Context, cl *client.Client, opts *apiv1.ListOptions) ([]object, error) {
			items, err := k.list(ctx, cl, opts)
			return objects(items), err
		}
	}
	if k.watch != nil {
		c.watch = func(ctx context.Context, cl *client.Client, opts *apiv1.WatchOptions, fn func(apiv1.EventType, object) error) error {
			s, err := k.watch(ctx, cl, opts)
			if err != nil {
				return err
			}
			return forEachEvent(s, fn)
		}
	}
	if k.create != nil {
		c.create = func(ctx context.Context, cl *client.Client, obj object) error {
			_, err := k.create(ctx, cl, obj.(T))
			return err
		}
	}
	if k.update != nil {
		c.update = func(ctx context.Context, cl *client.Client, obj object) (object, error) {
			return nilSafe(k.update(ctx, cl, obj.(T)))
		}
	}
	if k.specDefaults != nil {
		c.specDefaults = func(obj object) { k.specDefaults(obj.(T)) }
		c.update = func(ctx context.Context, cl *client.Client, obj object) (object, error) {
			return applyImmutable(ctx, cl, r, obj)
		}
	}
	c.delete = deleteCall(k.delete)
	c.deleteWithSnapshots = deleteCall(k.deleteWithSnapshots)
	if k.deleted != nil {
		c.deleted = func(name string, obj object) string {
			o, _ := obj.(T) // the zero T (nil) if the server sent nothing
			return k.deleted(name, o)
		}
	}
	if k.scale != nil {
		c.scale = func(ctx context.Context, cl *client.Client, req *apiv1.ScaleRequest) (*apiv1.ObjectMeta, error) {
			o, err := k.scale(ctx, cl, req)
			return o.GetMetadata(), err
		}
	}
	return r
}

func deleteCall[T object](del func(context.Context, *client.Client, *apiv1.ObjectKey) (T, error)) func(context.Context, *client.Client, *apiv1.ObjectKey) (object, error) {
	if del == nil {
		return nil
	}
	return func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (object, error) {
		return nilSafe(del(ctx, c, key))
	}
}

// paged is a kind's list from its List call: a page of
// client.ListPageSize at a time, as kubectl does, with the items sorted
// by namespace and name (paged lists come in key order).
func paged[T object, R client.ListResponse[T]](list func(context.Context, *client.Client, *apiv1.ListOptions) (R, error)) func(context.Context, *client.Client, *apiv1.ListOptions) ([]T, error) {
	return func(ctx context.Context, c *client.Client, opts *apiv1.ListOptions) ([]T, error) {
		items, _, err := client.ListAll(ctx, opts, func(ctx context.Context, o *apiv1.ListOptions) (R, error) {
			return list(ctx, c, o)
		})
		if err != nil {
			return nil, err
		}
		slices.SortFunc(items, func(a, b T) int {
			am, bm := a.GetMetadata(), b.GetMetadata()
			return cmp.Or(strings.Compare(am.GetNamespace(), bm.GetNamespace()), strings.Compare(am.GetName(), bm.GetName()))
		})
		return items, nil
	}
}

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
	items, err := res.calls.list(ctx, c, &apiv1.ListOptions{Namespace: namespace, LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	return items, nil
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
