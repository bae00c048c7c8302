package store

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selection is what a List or Watch delivers: the objects of a namespace
// ("" for all) with a name ("" for any) whose labels match a selector.
type Selection struct {
	Namespace, Name string
	Selector        labels.Selector
}

// Select parses and checks a selection of r's objects, refusing what the
// etcd key layout refuses (ErrInvalid), so that every backend refuses the
// same.
func (r Resource[T]) Select(namespace, name, selector string) (Selection, error) {
	k := newKeys("", r.Plural, r.Kind, r.Namespaced)
	sel, err := labels.Parse(selector)
	if err != nil {
		return Selection{}, fmt.Errorf("%ss: label selector %q: %w: %w", k.kind, selector, ErrInvalid, err)
	}
	if name != "" && (namespace != "" || !r.Namespaced) {
		_, err = k.key(namespace, name)
	} else {
		_, err = k.prefix(namespace)
	}
	return Selection{Namespace: namespace, Name: name, Selector: sel}, err
}

// Matches reports whether obj is selected.
func (s Selection) Matches(obj Object) bool {
	md := obj.GetMetadata()
	return (s.Namespace == "" || md.GetNamespace() == s.Namespace) && (s.Name == "" || md.GetName() == s.Name) &&
		(s.Selector.Empty() || s.Selector.Matches(labels.Set(md.GetLabels())))
}

// all says whether every object of the namespace is selected.
func (s Selection) all() bool { return s.Name == "" && s.Selector.Empty() }

// CheckKey refuses the namespace and name of an object of r that the etcd
// store refuses (ErrInvalid), and returns its Ref.
func (r Resource[T]) CheckKey(namespace, name string) (ref string, err error) {
	if _, err := newKeys("", r.Plural, r.Kind, r.Namespaced).key(namespace, name); err != nil {
		return "", err
	}
	return apiv1.Ref(namespace, name), nil
}

// SortByRef sorts objects in the order List returns them: by namespace,
// then name. (etcd's key order is almost that, but not quite: "a-b/x"
// sorts before "a/x".)
func SortByRef[T Object](objs []T) {
	slices.SortFunc(objs, func(a, b T) int {
		am, bm := a.GetMetadata(), b.GetMetadata()
		return cmp.Or(strings.Compare(am.GetNamespace(), bm.GetNamespace()), strings.Compare(am.GetName(), bm.GetName()))
	})
}
