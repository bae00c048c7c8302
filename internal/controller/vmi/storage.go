package vmi

import (
	"fmt"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// storageNeeds are the storage classes spec's persistent volumes are on,
// and, when one cannot be had, why no node can take the instance.
func storageNeeds(spec *apiv1.VirtualMachineInstanceSpec, lister StorageClassLister) ([]*apiv1.StorageClass, string) {
	refs := validation.StorageClassRefs(spec)
	if len(refs) == 0 {
		return nil, ""
	}
	var out []*apiv1.StorageClass
	for _, name := range refs {
		var sc *apiv1.StorageClass
		ok := false
		if lister != nil {
			sc, ok = lister.Get("", name)
		}
		if !ok {
			return nil, fmt.Sprintf("storage class %q does not exist (spec.volumes[].persistent.storage_class)", name)
		}
		out = append(out, sc)
	}
	return out, ""
}

// storageReasons says why node c cannot hold the instance's volumes: a
// class whose node selector it does not match, or that it does not report
// as reachable (its agent probes every class that selects it: monitors,
// key and pool, or the shared path).
func storageReasons(c candidate, nd needs) []string {
	if len(nd.classes) == 0 {
		return nil
	}
	reported := map[string]*apiv1.NodeStorage{}
	for _, s := range c.node.GetStatus().GetStorage() {
		reported[s.GetClass()] = s
	}
	var out []string
	for _, sc := range nd.classes {
		name := sc.GetMetadata().GetName()
		switch s := reported[name]; {
		case sc.FenceOf(c.node.GetMetadata().GetName()) != nil:
			out = append(out, fmt.Sprintf("node(s) were fenced from storage class %s", name))
		case !sc.SelectsNode(c.node.GetMetadata().GetLabels()):
			out = append(out, fmt.Sprintf("node(s) didn't match the node selector of storage class %s", name))
		case !s.GetReady():
			r := fmt.Sprintf("node(s) could not reach storage class %s", name)
			if cause := causeOf(s.GetMessage()); cause != "" {
				// Nodes that fail alike are counted together.
				r += " (" + cause + ")"
			}
			out = append(out, r)
		}
	}
	return out
}

// causeOf is the cause a node reports for a class it cannot reach: its
// message's first clause ("the monitors refused the user or key
// (spec.rbd.user, spec.rbd.key)"), without the CLI's text after it.
func causeOf(msg string) string {
	cause, _, _ := strings.Cut(msg, ": ")
	if len(cause) > 160 {
		cause = cause[:160] + "..."
	}
	return cause
}
