package store

import (
	"fmt"
	"strings"
)

// DefaultPrefix is where objects live unless Options.Prefix says otherwise.
const DefaultPrefix = "/virtplane/registry"

// keys maps object names to etcd keys for one resource:
// <prefix>/<plural>/<namespace>/<name>, or <prefix>/<plural>/<name> for
// cluster-scoped resources.
type keys struct {
	root       string // "<prefix>/<plural>/"
	kind       string // lower-case kind, for errors
	namespaced bool
}

func newKeys(prefix, plural, kind string, namespaced bool) keys {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	return keys{
		root:       strings.TrimRight(prefix, "/") + "/" + plural + "/",
		kind:       strings.ToLower(kind),
		namespaced: namespaced,
	}
}

// ref names an object in errors: "ns/name" or "name".
func (k keys) ref(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// key is the etcd key of one object. Only what would break the key layout
// is checked here; names are validated properly before they reach the
// store.
func (k keys) key(namespace, name string) (string, error) {
	ref := k.ref(namespace, name)
	switch {
	case name == "":
		return "", fmt.Errorf("%s %q: %w: name is required", k.kind, ref, ErrInvalid)
	case strings.Contains(name, "/"):
		return "", fmt.Errorf("%s %q: %w: name must not contain '/'", k.kind, ref, ErrInvalid)
	}
	if !k.namespaced {
		if namespace != "" {
			return "", fmt.Errorf("%s %q: %w: %ss are not namespaced", k.kind, ref, ErrInvalid, k.kind)
		}
		return k.root + name, nil
	}
	if err := k.checkNamespace(namespace, true); err != nil {
		return "", fmt.Errorf("%s %q: %w", k.kind, ref, err)
	}
	return k.root + namespace + "/" + name, nil
}

// prefix is the key prefix of all objects in namespace ("" for all).
func (k keys) prefix(namespace string) (string, error) {
	if namespace == "" {
		return k.root, nil
	}
	if !k.namespaced {
		return "", fmt.Errorf("%ss: %w: %ss are not namespaced", k.kind, ErrInvalid, k.kind)
	}
	if err := k.checkNamespace(namespace, false); err != nil {
		return "", fmt.Errorf("%ss: %w", k.kind, err)
	}
	return k.root + namespace + "/", nil
}

func (k keys) checkNamespace(namespace string, required bool) error {
	switch {
	case namespace == "" && required:
		return fmt.Errorf("%w: namespace is required", ErrInvalid)
	case strings.Contains(namespace, "/"):
		return fmt.Errorf("%w: namespace must not contain '/'", ErrInvalid)
	}
	return nil
}

// parse splits a key of this resource back into namespace and name.
func (k keys) parse(key string) (namespace, name string) {
	rest := strings.TrimPrefix(key, k.root)
	if !k.namespaced {
		return "", rest
	}
	namespace, name, _ = strings.Cut(rest, "/")
	return namespace, name
}

// CheckKey refuses the namespace and name of an object of r that the etcd
// store refuses (ErrInvalid), so that other backends (memstore) refuse the
// same, and returns how errors name the object ("namespace/name").
func (r Resource[T]) CheckKey(namespace, name string) (ref string, err error) {
	k := newKeys("", r.Plural, r.Kind, r.Namespaced)
	if _, err := k.key(namespace, name); err != nil {
		return "", err
	}
	return k.ref(namespace, name), nil
}

// CheckNamespace refuses a namespace to list or watch ("" for all) that
// the etcd store refuses.
func (r Resource[T]) CheckNamespace(namespace string) error {
	_, err := newKeys("", r.Plural, r.Kind, r.Namespaced).prefix(namespace)
	return err
}
