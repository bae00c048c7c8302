package command

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// kinds are the kinds of object the CLI knows, in the order completion
// offers them and messages list them. Each is one entry (kinds_*.go, one
// file per .proto file of the API) with everything get, delete, apply and
// scale need of it, so that the commands have no case per kind; a kind of
// the API missing here fails TestKindsCoverTheAPI.
var kinds = []*resource{
	vmResource, vmiResource, replicaSetResource, poolResource, nodeResource, imageResource, storageClassResource,
	migrationResource, snapshotResource, snapshotContentResource, restoreResource, cloneResource,
	exportResource,
	backupTargetResource, backupResource, backupScheduleResource, backupRestoreResource,
	adoptionResource,
	namespaceResource, userResource, serviceAccountResource, credentialResource, roleBindingResource, clusterRoleBindingResource,
}

// resource is one kind of object the CLI knows by name: an entry of kinds.
type resource struct {
	Kind       string // "VirtualMachine": json/yaml kind and validation errors; the message's name
	Singular   string // "virtualmachine": messages, like kubectl
	Namespaced bool
	// names are what the commands take for the kind, in any case; the
	// first is the one completion offers and messages list. They include
	// Kind in lower case, which apply looks a manifest's kind up by.
	names []string
	// columns are get's table (get -A adds NAMESPACE before them for a
	// namespaced kind); wideColumns are what -o wide adds after them.
	columns, wideColumns []string

	// getBy and deleteBy, when set, are the kind's own commands, which get
	// and delete hand over to. They are interfaces rather than funcs
	// because those commands name their resource (describeError(err,
	// imageResource, ...)): a func literal here would make the resource's
	// initialization refer to itself (a compile error), whereas Go does
	// not follow the methods of a value stored in an interface.
	getBy    ownGet
	deleteBy ownDelete
	// deleteRefusal, when set, is why delete does not take the kind and
	// what deletes it instead.
	deleteRefusal string

	// calls are the kind's calls on its service, made by kind.define.
	calls objectCalls
}

// ownGet is get for a kind that has a get command of its own; wide is
// get -o wide.
type ownGet interface {
	get(ctx context.Context, o *getOptions, out, errOut io.Writer, name string, wide bool) error
}

// ownDelete is delete for a kind that has a delete command of its own.
type ownDelete interface {
	delete(ctx context.Context, o *deleteOptions, out io.Writer, names []string) error
}

// objectCalls are a kind's calls and table rows on objects, as the
// commands use them. A nil call is one the kind does not have: getObject
// and the others say so rather than call another kind's service.
type objectCalls struct {
	newObject func() object
	row       func(obj object, now time.Time) []string
	wide      func(obj object) []string

	get    func(context.Context, *client.Client, *apiv1.ObjectKey) (object, error)
	list   func(context.Context, *client.Client, *apiv1.ListOptions) ([]object, error)
	watch  func(context.Context, *client.Client, *apiv1.WatchOptions, func(apiv1.EventType, object) error) error
	create func(context.Context, *client.Client, object) error
	update func(context.Context, *client.Client, object) (object, error)
	// specDefaults fills the server's defaults into the empty fields of
	// an object's spec (which is set), for a kind whose spec cannot
	// change: apply compares what exists with the manifest rather than
	// updating it (applyImmutable).
	specDefaults func(object)
	delete       func(context.Context, *client.Client, *apiv1.ObjectKey) (object, error)
	// deleteWithSnapshots is delete --delete-snapshots.
	deleteWithSnapshots func(context.Context, *client.Client, *apiv1.ObjectKey) (object, error)
	// deleted is what delete prints when the kind says more than
	// "<singular> "<name>" deleted".
	deleted func(name string, obj object) string
	scale   func(context.Context, *client.Client, *apiv1.ScaleRequest) (*apiv1.ObjectMeta, error)
}

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
	c.get = onObjects(k.get)
	if k.list != nil {
		c.list = func(ctx context.Context, cl *client.Client, opts *apiv1.ListOptions) ([]object, error) {
			items, err := k.list(ctx, cl, opts)
			if err != nil {
				return nil, err
			}
			return objects(items), nil
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
	c.delete = onObjects(k.delete)
	c.deleteWithSnapshots = onObjects(k.deleteWithSnapshots)
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

// onObjects is call answering an object, nil when call is.
func onObjects[A any, T object](call func(context.Context, *client.Client, A) (T, error)) func(context.Context, *client.Client, A) (object, error) {
	if call == nil {
		return nil
	}
	return func(ctx context.Context, c *client.Client, a A) (object, error) {
		return nilSafe(call(ctx, c, a))
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

// resourceNames finds a kind by any of its names.
var resourceNames = func() map[string]*resource {
	m := map[string]*resource{}
	for _, r := range kinds {
		for _, n := range r.names {
			m[n] = r
		}
	}
	return m
}()

// resourceArgs is the completion list for the TYPE argument.
var resourceArgs = firstNames(func(*resource) bool { return true })

// firstNames are the first names of the kinds that keep says yes to, in
// the order of kinds.
func firstNames(keep func(*resource) bool) []string {
	var out []string
	for _, r := range kinds {
		if keep(r) {
			out = append(out, r.names[0])
		}
	}
	return out
}

func lookupResource(name string) (*resource, error) {
	if r, ok := resourceNames[strings.ToLower(name)]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("unknown resource type %q (want %s)", name, orList(resourceArgs))
}

// orList is "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
