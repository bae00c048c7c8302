package store

import (
	"fmt"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
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

// key is the etcd key of one object. Only what would break the key layout
// is checked here; names are validated properly before they reach the
// store.
func (k keys) key(namespace, name string) (string, error) {
	ref := apiv1.Ref(namespace, name)
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
