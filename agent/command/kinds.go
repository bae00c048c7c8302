package command

import (
	"context"
	"fmt"
	"io"
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
	vmResource, vmiResource, replicaSetResource, poolResource, nodeResource, imageResource,
	migrationResource, snapshotResource, snapshotContentResource, restoreResource, cloneResource,
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
	// imageResource, ...)): a func here would make the resource's
	// initialization depend on itself, a value of a type with methods
	// does not.
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
