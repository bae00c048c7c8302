package provider

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The ids of resources and data sources: how an object's key becomes the
// id Terraform records and imports, and back.

// namespacedID is the id of an object in a namespace: "namespace/name".
func namespacedID(namespace, name string) string { return namespace + "/" + name }

// parseNamespacedID accepts "namespace/name" and a bare "name" (default namespace).
func parseNamespacedID(id string) (namespace, name string, err error) {
	parts := strings.Split(id, "/")
	switch {
	case len(parts) == 1 && parts[0] != "":
		return apiv1.DefaultNamespace, parts[0], nil
	case len(parts) == 2 && parts[0] != "" && parts[1] != "":
		return parts[0], parts[1], nil
	}
	return "", "", fmt.Errorf("want namespace/name or name, got %q", id)
}

// selectorID canonicalises the selector so that equivalent spellings give
// the same id.
func selectorID(selector string) string {
	sel, err := labels.Parse(selector)
	switch {
	case err != nil:
		return selector // unreachable: the validator parsed it already
	case sel.Empty():
		return allNodesID
	}
	return sel.String()
}

// allNodesID is the id when no selector is set; it is not a valid selector,
// so it cannot collide with one.
const allNodesID = "*"
