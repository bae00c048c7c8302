package validation

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Who sets which label of a Node, as Kubernetes' NodeRestriction decides
// it for kubelets, but by an allow-list: a node sets only the labels under
// apiv1.NodeLabelPrefix, the server sets apiv1.LabelNodeName, and every
// other label is an admin's. A node selector on an admin label then
// reaches only the nodes an admin chose, whatever a compromised node
// reports about itself.

const (
	// MaxNodeOwnedLabels bounds the labels a node registers with: a node
	// reports a few facts about itself, and its labels must leave room for
	// the admins' under MaxLabels.
	MaxNodeOwnedLabels = 16
	// MaxAdminNodeLabels bounds the admins' labels of a node: with the
	// node's own and virtplane.io/node-name a Node never carries more than
	// MaxLabels, and neither side can crowd the other out.
	MaxAdminNodeLabels = MaxLabels - MaxNodeOwnedLabels - 1
)

// legacyNodeLabels are the node's own labels of earlier releases, outside
// apiv1.NodeLabelPrefix, each with the key that replaced it. A node agent
// not upgraded yet still registers with one: Register stores it under the
// new key (and the old key, left on the Node, goes with the node's first
// registration), so that a rolling upgrade, servers first, never strands
// a node that restarts before its own upgrade. An admin cannot set one.
var legacyNodeLabels = map[string]string{"virtplane.io/kvm": apiv1.LabelKVM}

// NodeOwnedLabel reports whether key is one of a node's own labels: one
// under apiv1.NodeLabelPrefix, or a legacy one (legacyNodeLabels).
func NodeOwnedLabel(key string) bool {
	_, legacy := legacyNodeLabels[key]
	return legacy || strings.HasPrefix(key, apiv1.NodeLabelPrefix)
}

// NodeLabelKey is the key a node's own label is stored under: key, or
// for a legacy one the key that replaced it.
func NodeLabelKey(key string) string {
	if k, ok := legacyNodeLabels[key]; ok {
		return k
	}
	return key
}

// AdminNodeLabel reports whether key is an admin's label on a Node:
// neither the node's own nor the server's virtplane.io/node-name.
func AdminNodeLabel(key string) bool { return !NodeOwnedLabel(key) && key != apiv1.LabelNodeName }

// ValidateNodeOwnedLabels checks the labels a node's agent is configured
// to send: label syntax, and the labels a node may set
// (validateNodeOwnership). ValidateNode checks a registration so.
func ValidateNodeOwnedLabels(labels map[string]string, path *field.Path) field.ErrorList {
	return append(validateLabels(labels, path), validateNodeOwnership(labels, path)...)
}

// validateNodeOwnership checks that a node sets only its own labels: at
// most MaxNodeOwnedLabels, each under apiv1.NodeLabelPrefix.
func validateNodeOwnership(labels map[string]string, path *field.Path) field.ErrorList {
	if len(labels) > MaxNodeOwnedLabels {
		return field.ErrorList{field.TooMany(path, len(labels), MaxNodeOwnedLabels)}
	}
	var errs field.ErrorList
	for _, k := range sortedKeys(labels) {
		if !NodeOwnedLabel(k) {
			errs = append(errs, field.Forbidden(path.Key(k), fmt.Sprintf(
				"a node may set only labels under %s; every other label of a node is set by an admin (virtplane-agent node label)",
				apiv1.NodeLabelPrefix)))
		}
	}
	return errs
}

// ValidateAdminNodeLabelKey checks a key an admin sets or removes on a
// node: label key syntax, and an admin's label (AdminNodeLabel).
func ValidateAdminNodeLabelKey(key string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range content.IsLabelKey(key) {
		errs = append(errs, field.Invalid(path, key, msg))
	}
	switch {
	case NodeLabelKey(key) != key:
		errs = append(errs, field.Forbidden(path, fmt.Sprintf(
			"node agents of earlier releases set it; it is the node's own, now %s", NodeLabelKey(key))))
	case NodeOwnedLabel(key):
		errs = append(errs, field.Forbidden(path, fmt.Sprintf(
			"labels under %s are the node's own: its agent reports them when it registers", apiv1.NodeLabelPrefix)))
	case key == apiv1.LabelNodeName:
		errs = append(errs, field.Forbidden(path, "the server sets it to the node's name"))
	}
	return errs
}

// ValidateLabelNode checks a Nodes.Label request: the node's name, each
// key set or removed (ValidateAdminNodeLabelKey), the values, and that no
// key is both set and removed. Whether the result fits
// MaxAdminNodeLabels depends on the node: ValidateAdminNodeLabelCount.
func ValidateLabelNode(req *apiv1.LabelNodeRequest) field.ErrorList {
	errs := ValidateNodeName(req.GetName(), field.NewPath("name"))
	set, remove := field.NewPath("set"), field.NewPath("remove")
	if len(req.GetSet()) > MaxAdminNodeLabels {
		errs = append(errs, field.TooMany(set, len(req.GetSet()), MaxAdminNodeLabels))
	} else {
		for _, k := range sortedKeys(req.GetSet()) {
			errs = append(errs, ValidateAdminNodeLabelKey(k, set.Key(k))...)
			for _, msg := range content.IsLabelValue(req.GetSet()[k]) {
				errs = append(errs, field.Invalid(set.Key(k), req.GetSet()[k], msg))
			}
		}
	}
	// Removing more keys than a node can have is no request anyone means.
	if len(req.GetRemove()) > MaxLabels {
		return append(errs, field.TooMany(remove, len(req.GetRemove()), MaxLabels))
	}
	for i, k := range req.GetRemove() {
		errs = append(errs, ValidateAdminNodeLabelKey(k, remove.Index(i))...)
		if _, ok := req.GetSet()[k]; ok {
			errs = append(errs, field.Invalid(remove.Index(i), k, "is also set: a label cannot be both set and removed"))
		}
	}
	return errs
}

// ValidateAdminNodeLabelCount checks the labels a Label request would
// leave on a node: at most MaxAdminNodeLabels of them an admin's.
func ValidateAdminNodeLabelCount(labels map[string]string, path *field.Path) field.ErrorList {
	n := 0
	for k := range labels {
		if AdminNodeLabel(k) {
			n++
		}
	}
	if n > MaxAdminNodeLabels {
		return field.ErrorList{field.TooMany(path, n, MaxAdminNodeLabels)}
	}
	return nil
}
