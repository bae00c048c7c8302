package vmi

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Why a node cannot take an instance's host resources: a host port of one
// of its forwards that another instance there overlaps
// (validation.HostPort.Overlaps), one reason per port, kube-scheduler
// style ("0/3 nodes are available: 3 node(s) had the host port
// 127.0.0.1:18080/tcp in use."), as its NodePorts filter says "node(s)
// didn't have free ports for the requested pod ports".
const reasonHostPortFormat = "node(s) had the host port %s in use"

// specPath is an instance's spec, where the policy's refusals point.
var specPath = field.NewPath("spec")

// policyRefusal is why no node may take spec under policy ("" when it
// may): the first of what breaks the policy, with how many more.
func policyRefusal(policy *validation.HostPolicy, spec *apiv1.VirtualMachineInstanceSpec) string {
	errs := policy.Check(spec, specPath)
	if len(errs) == 0 {
		return ""
	}
	msg := "the server's host-resource policy refuses the instance: " + strings.TrimSuffix(errs[0].Error(), ".")
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return msg + "."
}

// namespaceRefusal is why no node may take vmi because its namespace
// does not allow one of its host resources ("" when it does): the first
// with how many more, as policyRefusal says the server's.
func namespaceRefusal(namespaces NamespaceLister, vmi *apiv1.VirtualMachineInstance) string {
	if namespaces == nil {
		return ""
	}
	name := vmi.GetMetadata().GetNamespace()
	obj, ok := namespaces.Get("", name)
	if !ok || obj.GetSpec().GetAllowed() == nil {
		return ""
	}
	errs := validation.CheckNamespaceAllowed(name, obj.GetSpec().GetAllowed(), vmi.GetSpec(), specPath)
	if len(errs) == 0 {
		return ""
	}
	msg := "namespace " + name + " does not allow the instance's host resources: " + strings.TrimSuffix(errs[0].Error(), ".")
	if len(errs) > 1 {
		msg += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return msg + "."
}

// portReasons are the reasons for the host ports in use on a candidate.
func portReasons(inUse []validation.HostPort) []string {
	out := make([]string, 0, len(inUse))
	for _, hp := range inUse {
		out = append(out, fmt.Sprintf(reasonHostPortFormat, hp))
	}
	return out
}
