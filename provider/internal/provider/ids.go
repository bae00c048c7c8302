package provider

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The ids of resources and data sources: how an object's key becomes the
// id Terraform records and imports, and back. An object's id is
// apiv1.Ref(namespace, name): "namespace/name", as the provider's
// namespaces are never empty (the schemas default them to "default" and
// validate them as DNS labels, the data sources use namespaceOrDefault,
// an import parseNamespacedID, and the agent stores no namespaced object
// without a namespace).

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

// namespaceOrDefault is the namespace a configuration names, or the
// default namespace where it names none.
func namespaceOrDefault(ns types.String) string {
	return cmp.Or(ns.ValueString(), apiv1.DefaultNamespace)
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

// importNamespaced imports an object of a namespace by its id, which
// parseNamespacedID reads, into the id, namespace and name attributes, and
// reports whether it could. k is the kind imported ("Import a replica
// set by ..."); example, when not "", is an id to show ("default/web").
func importNamespaced(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, k objectKind, example string) bool {
	ns, name, err := parseNamespacedID(req.ID)
	if err != nil {
		if example != "" {
			example = " (" + example + ")"
		}
		resp.Diagnostics.AddError("Invalid import ID",
			"Import a "+k.noun+" by namespace/name"+example+", or by name alone for the default namespace: "+err.Error())
		return false
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), apiv1.Ref(ns, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	return true
}

// importClusterScoped imports a cluster-scoped object by its name into
// the id and name attributes.
func importClusterScoped(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, k objectKind, example string) {
	if req.ID == "" || strings.Contains(req.ID, "/") {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import a "+k.noun+" by its name ("+example+"); "+k.noun+"s have no namespace. Got "+strconv.Quote(req.ID)+".")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
}

// importNode imports an object that is a node's (its maintenance, its
// labels) by the node's name, into the id and node attributes. what is
// the object imported: "a node's labels".
func importNode(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse, what string) {
	if req.ID == "" {
		resp.Diagnostics.AddError("Invalid import ID", "Import "+what+" by the node's name: terraform import <address> NODE")
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("node"), req.ID)...)
}
