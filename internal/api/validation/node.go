package validation

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Resources a node reports: what the placement controller reads. Any
// other name is a mistake or a phantom, and is refused.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
)

// Upper bounds on what a node may report, in the canonical form the
// figures are compared in. Larger figures are no host's: they are a bug
// or a phantom node fishing for placements (a node registered with
// 1 PiB of memory attracted every VM).
const (
	// maxNodeCPU: 4096 logical CPUs is the most KVM runs in one VM
	// (KVM_MAX_VCPUS on x86) and more than twice the largest x86 hosts
	// sold (HPE Superdome Flex: 1,792 threads).
	maxNodeCPU = "4096"
	// maxNodeMemory: 64 TiB is what x86-64 addresses with 4-level paging
	// (46 physical address bits), more than any server sold holds.
	maxNodeMemory = "64Ti"
	// maxNodeInfoLen bounds each node_info string (versions, kernel,
	// architecture, host name): real ones are a few dozen bytes.
	maxNodeInfoLen = 256
	// maxNodeAddressLen fits "[" + an IPv6 address or a 253-byte DNS
	// name + "]:" + a port.
	maxNodeAddressLen = 253 + 8
)

// ValidateNode checks a node as registered by its agent: the name (a
// DNS-1123 subdomain, since it is usually the hostname), labels (only the
// node's own: nodelabels.go), the resource figures the scheduler will
// parse, node_info and address strings, its image list, and its bridges
// and libvirt networks. The server keeps nothing else of what a node sends
// (conditions, heartbeat and lease are its own).
func ValidateNode(node *apiv1.Node) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := ValidateObjectMeta(node.GetMetadata(), false, meta)
	errs = append(errs, validateNodeOwnership(node.GetMetadata().GetLabels(), meta.Child("labels"))...)
	status := field.NewPath("status")
	st := node.GetStatus()
	errs = append(errs, validateResourceList(st.GetCapacity(), status.Child("capacity"))...)
	errs = append(errs, validateResourceList(st.GetAllocatable(), status.Child("allocatable"))...)
	errs = append(errs, ValidateAllocatable(st.GetAllocatable(), st.GetCapacity(), status.Child("allocatable"))...)
	errs = append(errs, validateNodeInfo(st.GetNodeInfo(), status.Child("node_info"))...)
	errs = append(errs, validatePrintable(st.GetAddress(), maxNodeAddressLen, status.Child("address"), false)...)
	errs = append(errs, ValidateNodeImages(st.GetImages(), status.Child("images"))...)
	errs = append(errs, ValidateNodeNetworks(st.GetBridges(), st.GetNetworks(), status.Child("bridges"), status.Child("networks"))...)
	if a := st.GetMigrationAddress(); a != "" {
		// Every migration to the node is built from it: the operator's
		// networks and other nodes' addresses are the server's to check.
		if _, err := migrationdest.ParseAddress(a); err != nil {
			errs = append(errs, field.Invalid(status.Child("migration_address"), a, err.Error()))
		}
	}
	errs = append(errs, validateExportEndpoint(st, status)...)
	return errs
}

// ValidateNodeName checks the name a node request (heartbeat, get) names
// a node by: a DNS-1123 subdomain, as ValidateNode requires.
func ValidateNodeName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	return dns1123Subdomain(name, path)
}

// ValidateHeartbeat checks what a heartbeat would store: the node name
// and the allocatable figures, against the capacity the node registered
// (nil when not known yet). The image list is ValidateNodeImages'.
func ValidateHeartbeat(name string, allocatable, capacity map[string]string) field.ErrorList {
	errs := ValidateNodeName(name, field.NewPath("name"))
	p := field.NewPath("allocatable")
	errs = append(errs, validateResourceList(allocatable, p)...)
	if capacity != nil {
		errs = append(errs, ValidateAllocatable(allocatable, capacity, p)...)
	}
	return errs
}

// validateResourceList checks a node's resource figures: known names
// (ResourceCPU, ResourceMemory), canonical non-negative quantities (the
// form the server would print, so that one figure has one spelling), and
// no more than any host has.
func validateResourceList(list map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(list) {
		p := path.Key(k)
		var limit string
		switch k {
		case ResourceCPU:
			limit = maxNodeCPU
		case ResourceMemory:
			limit = maxNodeMemory
		default:
			errs = append(errs, field.NotSupported(path, k, []string{ResourceCPU, ResourceMemory}))
			continue
		}
		v := list[k]
		q, err := parseQuantity(v)
		if err != nil {
			errs = append(errs, field.Invalid(p, v, "must be a quantity such as 4, 500m or 16Gi"))
			continue
		}
		switch c, err := CanonicalQuantity(v); {
		case q.Sign() < 0:
			errs = append(errs, field.Invalid(p, v, "must not be negative"))
		case q.Cmp(resource.MustParse(limit)) > 0:
			errs = append(errs, field.Invalid(p, v, fmt.Sprintf("must be at most %s: no host has more", limit)))
		case k == ResourceMemory && !isWholeNumber(q):
			errs = append(errs, field.Invalid(p, v, "must be a whole number of bytes"))
		case err != nil || c != v:
			errs = append(errs, field.Invalid(p, v, fmt.Sprintf("must be in canonical form (%q)", c)))
		}
	}
	return errs
}

// ValidateAllocatable reports an allocatable figure above the capacity
// of the same resource: what a node can give is part of what it has.
// Figures that do not parse are validateResourceList's to report.
func ValidateAllocatable(allocatable, capacity map[string]string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, k := range sortedKeys(allocatable) {
		c, ok := capacity[k]
		if !ok {
			continue
		}
		qa, errA := parseQuantity(allocatable[k])
		qc, errC := parseQuantity(c)
		if errA == nil && errC == nil && qa.Cmp(qc) > 0 {
			errs = append(errs, field.Invalid(path.Key(k), allocatable[k], fmt.Sprintf("must not be more than the capacity (%s)", c)))
		}
	}
	return errs
}

func validateNodeInfo(info *apiv1.NodeInfo, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name, v string
	}{
		{"hostname", info.GetHostname()},
		{"agent_version", info.GetAgentVersion()},
		{"libvirt_version", info.GetLibvirtVersion()},
		{"qemu_version", info.GetQemuVersion()},
		{"kernel_version", info.GetKernelVersion()},
		{"architecture", info.GetArchitecture()},
	} {
		errs = append(errs, validatePrintable(f.v, maxNodeInfoLen, path.Child(f.name), true)...)
	}
	return errs
}

// validatePrintable checks a free-form string a node reports, which ends
// up in tables and logs: at most max bytes of valid UTF-8 without control
// characters (no escape sequences for an operator's terminal), and no
// spaces unless spaces is set.
func validatePrintable(s string, max int, path *field.Path, spaces bool) field.ErrorList {
	switch {
	case len(s) > max:
		return field.ErrorList{field.TooLong(path, "", max)}
	case !utf8.ValidString(s):
		return field.ErrorList{field.Invalid(path, s, "must be valid UTF-8")}
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return field.ErrorList{field.Invalid(path, s, "must not contain control characters")}
	case !spaces && strings.IndexFunc(s, unicode.IsSpace) >= 0:
		return field.ErrorList{field.Invalid(path, s, "must not contain spaces")}
	}
	return nil
}
