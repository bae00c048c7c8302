package vmi

import (
	"fmt"
	"slices"
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

// portIndex says which instances hold which host ports on which node:
// those usage counts there (placed, not final; migration targets
// included), as macIndex does for MACs. By protocol and port: a placement
// looks up its own few forwards once, whatever the number of nodes and
// instances, and compares addresses only within a port.
type portIndex map[portSlot][]portHolder

type portSlot struct {
	protocol string
	port     uint16
}

type portHolder struct {
	node, key string
	hp        validation.HostPort
}

func slotOf(hp validation.HostPort) portSlot { return portSlot{hp.Protocol, hp.Port} }

func (m portIndex) add(node, key string, ports []validation.HostPort) {
	for _, hp := range ports {
		m[slotOf(hp)] = append(m[slotOf(hp)], portHolder{node, key, hp})
	}
}

// remove takes one of key's holdings away (see macIndex.remove).
func (m portIndex) remove(node, key string, ports []validation.HostPort) {
	for _, hp := range ports {
		s := slotOf(hp)
		i := slices.Index(m[s], portHolder{node, key, hp})
		if i < 0 {
			continue
		}
		left := slices.Delete(m[s], i, i+1)
		if len(left) == 0 {
			delete(m, s)
			continue
		}
		m[s] = left
	}
}

// heldByOthers adds to byNode, per node, those of ports that an
// instance other than self holds an overlapping port for there.
func (m portIndex) heldByOthers(self string, ports []validation.HostPort, byNode map[string][]validation.HostPort) {
	for _, hp := range ports {
		for _, h := range m[slotOf(hp)] {
			if h.key != self && h.hp.Overlaps(hp) && !slices.Contains(byNode[h.node], hp) {
				byNode[h.node] = append(byNode[h.node], hp)
			}
		}
	}
}

// portReasons are the reasons for the host ports in use on a candidate.
func portReasons(inUse []validation.HostPort) []string {
	out := make([]string, 0, len(inUse))
	for _, hp := range inUse {
		out = append(out, fmt.Sprintf(reasonHostPortFormat, hp))
	}
	return out
}
