package vmi

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Resource names in node capacity and allocatable maps.
const (
	resourceCPU    = "cpu"
	resourceMemory = "memory"
)

// Reasons a node cannot take a VMI. The wording follows kube-scheduler's
// filter plugins, so "0/3 nodes are available: ..." reads the way
// KubeVirt users already know from their launcher pods.
const (
	reasonFenced             = "node(s) were fenced"
	reasonNotReady           = "node(s) were not ready"
	reasonCordoned           = "node(s) were unschedulable"
	reasonAgentNotReady      = "node(s) had an agent that is not ready to run VMs"
	reasonSelector           = "node(s) didn't match node selector"
	reasonImages             = "node(s) didn't have the image(s)"
	reasonInsufficientCPU    = "Insufficient cpu"
	reasonInsufficientMemory = "Insufficient memory"
)

// maxAmount caps node figures so that sums over a node's VMIs cannot
// overflow int64; 2^62 bytes or millicores is far beyond any host.
const maxAmount = int64(1) << 62

// resources are CPU (millicores) and memory (bytes). int64 arithmetic keeps
// the hot path free of the big-number code and of resource.Quantity's
// shared internal state; quantities are only parsed at the edges.
type resources struct {
	milliCPU int64
	memory   int64
}

func (r resources) plus(o resources) resources {
	return resources{milliCPU: r.milliCPU + o.milliCPU, memory: r.memory + o.memory}
}

func (r resources) minus(o resources) resources {
	return resources{milliCPU: r.milliCPU - o.milliCPU, memory: r.memory - o.memory}
}

// request is what a VMI reserves on its node: guest memory plus the
// per-VM overhead, and its vCPUs divided by the CPU allocation ratio
// (KubeVirt's 100m per vCPU at the default ratio of 10), rounded up.
func request(spec *apiv1.VirtualMachineInstanceSpec, o Options) (resources, error) {
	guest := spec.GetDomain().GetMemory().GetGuest()
	q, err := resource.ParseQuantity(guest)
	if err != nil {
		return resources{}, fmt.Errorf("spec.domain.memory.guest %q: %w", guest, err)
	}
	cpu := spec.GetDomain().GetCpu()
	vcpus := int64(1)
	// Zero is "unset" (defaulted to 1 by the API); validation refuses
	// negative counts, so treat them as 1 rather than as a credit.
	for _, n := range []int32{cpu.GetCores(), cpu.GetSockets(), cpu.GetThreads()} {
		vcpus *= int64(max(n, 1))
	}
	ratio := max(o.CPUAllocationRatio, 1)
	return resources{
		milliCPU: (vcpus*1000 + ratio - 1) / ratio,
		memory:   amount(q, 0) + amount(o.MemoryOverhead, 0),
	}, nil
}

// amount converts q to an int64 at scale (0 for units, resource.Milli for
// millis), clamped to [0, maxAmount].
func amount(q resource.Quantity, scale resource.Scale) int64 {
	if q.Sign() <= 0 {
		return 0
	}
	limit := resource.NewScaledQuantity(maxAmount, scale)
	if q.Cmp(*limit) >= 0 {
		return maxAmount
	}
	return q.ScaledValue(scale)
}

// allocatable reads a node's allocatable figure for name, falling back to
// capacity; a missing or unparsable figure counts as zero so the node is
// reported as insufficient rather than silently overcommitted.
func allocatable(node *apiv1.Node, name string, scale resource.Scale) int64 {
	s, ok := node.GetStatus().GetAllocatable()[name]
	if !ok {
		s = node.GetStatus().GetCapacity()[name]
	}
	return parsedAmount(s, scale)
}

// quantities caches parsed node quantities: placement reads every node's
// allocatable CPU and memory for every instance it places, and parsing
// them again was a tenth of the server's CPU at 100,000 VMs on 1,000
// nodes. Nodes report few distinct values, so the cache stays small; it
// stops growing at maxCachedQuantities all the same.
var quantities sync.Map // quantityKey → int64

const maxCachedQuantities = 4096

var cachedQuantities atomic.Int64

type quantityKey struct {
	s     string
	scale resource.Scale
}

// parsedAmount is amount(ParseQuantity(s), scale), 0 when s does not parse.
func parsedAmount(s string, scale resource.Scale) int64 {
	k := quantityKey{s, scale}
	if v, ok := quantities.Load(k); ok {
		return v.(int64)
	}
	var v int64
	if q, err := resource.ParseQuantity(s); err == nil {
		v = amount(q, scale)
	}
	if cachedQuantities.Load() < maxCachedQuantities {
		if _, loaded := quantities.LoadOrStore(k, v); !loaded {
			cachedQuantities.Add(1)
		}
	}
	return v
}

func nodeAllocatable(node *apiv1.Node) resources {
	return resources{
		milliCPU: allocatable(node, resourceCPU, resource.Milli),
		memory:   allocatable(node, resourceMemory, 0),
	}
}

// candidate is a node and what is already committed on it (cached VMIs
// plus assumed placements).
type candidate struct {
	node *apiv1.Node
	used resources
	// macsInUse are those of the VMI's MACs (nodeMACs) that another
	// instance holds on the node.
	macsInUse []string
	// portsInUse are those of the VMI's host ports (holdings.ports) that
	// another instance holds an overlapping port for on the node.
	portsInUse []validation.HostPort
	// excluded, when set, is why the node may not take this VMI
	// whatever it has free (a migration's source node).
	excluded string
}

// needs is what a VMI asks of its node.
type needs struct {
	req resources
	sel map[string]string
	// images are the images it names (requiredImages).
	images []string
	// bridges and networks are the bridges and libvirt networks it
	// attaches to (networkNeeds).
	bridges, networks []string
	// refused, when set, is why the host-resource policy lets no node
	// take it (policyRefusal), or why no node can have its volumes.
	refused string
	// classes are the storage classes its persistent volumes are on
	// (storageNeeds).
	classes []*apiv1.StorageClass
}

// needsOf is what spec asks of its node, with request req and the images
// it needs there, and whether policy lets it have them at all.
func needsOf(spec *apiv1.VirtualMachineInstanceSpec, req resources, sel map[string]string, images []string, policy *validation.HostPolicy, classes StorageClassLister) needs {
	nd := needs{req: req, sel: sel, images: images, refused: policyRefusal(policy, spec)}
	nd.bridges, nd.networks = networkNeeds(spec)
	var missing string
	nd.classes, missing = storageNeeds(spec, classes)
	if nd.refused == "" && missing != "" {
		nd.refused = missing
	}
	return nd
}

// decision is the outcome of choose: a node, or why there is none.
type decision struct {
	node    string
	message string
}

// choose picks the node for a VMI that needs nd: its request, node
// selector, images, bridges, libvirt networks and host ports; none when
// the host-resource policy refuses it (needs.refused). A node that lacks
// an image it could pull (pullable: an Image object names it) still fits;
// one that lacks any other image does not, nor one without a bridge or
// libvirt network, nor one where another instance has one of the VMI's
// MACs (candidate.macsInUse) or a host port overlapping one of its
// forwards' (candidate.portsInUse). Among the nodes that fit it prefers
// those holding more of the images already (no download before the
// start), then the one with the largest fraction of memory still free
// after the placement (spreading load, as kube-scheduler's
// LeastAllocated scoring does), ties broken by name so that decisions
// are reproducible.
func choose(nd needs, pullable func(string) bool, nodes []candidate) decision {
	if nd.refused != "" {
		// The server's, not a node's: the same for every node.
		return decision{message: fmt.Sprintf("0/%d nodes are available: %s", len(nodes), nd.refused)}
	}
	reasons := map[string]int{}
	missing := map[string]bool{}
	best, bestHave, bestScore := "", -1, math.Inf(-1)
	for _, c := range nodes {
		rs := unfit(c, nd)
		if c.excluded != "" {
			rs = []string{c.excluded}
		}
		have := len(nd.images)
		if len(rs) == 0 {
			m := missingImages(c.node, nd.images)
			have -= len(m)
			for _, name := range m {
				if pullable == nil || !pullable(name) {
					rs = []string{reasonImages}
					missing[name] = true
				}
			}
		}
		if len(rs) > 0 {
			for _, r := range rs {
				reasons[r]++
			}
			continue
		}
		alloc := nodeAllocatable(c.node).memory
		score := 0.0
		if alloc > 0 {
			score = float64(alloc-c.used.memory-nd.req.memory) / float64(alloc)
		}
		name := c.node.GetMetadata().GetName()
		if have > bestHave || (have == bestHave && (score > bestScore || (score == bestScore && name < best))) {
			best, bestHave, bestScore = name, have, score
		}
	}
	if best != "" {
		return decision{node: best}
	}
	msg := unavailableMessage(len(nodes), reasons)
	if len(missing) > 0 {
		msg += " Missing image(s): " + quotedList(missing) + "."
	}
	return decision{message: msg}
}

// requiredImages returns the images spec needs on its node, as nodes list
// them: image volumes, persistent volumes' images, the kernel and initrd.
// Absolute references are left out: nodes list images relative to their
// image directory, and where each keeps it is not known here. A VMI
// pinned to its node (LabelNodeName: its VM's persistent volumes live
// there) does not need its persistent volumes' images any more: they were
// copied when the volumes were made; nor does one whose VM ran before
// need those of its volumes on storage classes (AnnotationVMRanBefore).
func requiredImages(v *apiv1.VirtualMachineInstance) []string {
	spec := v.GetSpec()
	_, pinned := spec.GetNodeSelector()[apiv1.LabelNodeName]
	if !pinned && v.GetMetadata().GetAnnotations()[apiv1.AnnotationVMRanBefore] == "true" {
		// Volumes on storage classes were made at an earlier start: their
		// images are not needed where the VM runs next.
		spec = &apiv1.VirtualMachineInstanceSpec{Domain: spec.GetDomain(), Volumes: localVolumes(spec)}
	}
	return validation.ImageRefs(spec, "", !pinned)
}

// localVolumes are spec's volumes but those on storage classes.
func localVolumes(spec *apiv1.VirtualMachineInstanceSpec) []*apiv1.Volume {
	var out []*apiv1.Volume
	for _, v := range spec.GetVolumes() {
		if pv := v.GetPersistent(); pv == nil || pv.IsLocal() {
			out = append(out, v)
		}
	}
	return out
}

// missingImages returns which of images node does not list. A node that
// lists no images at all is taken to have them: agents from before the
// inventory and fake nodes report none, and for a real node with an empty
// image directory the agent still fails the VMI naming the missing file,
// as it did before nodes reported images.
func missingImages(node *apiv1.Node, images []string) []string {
	have := node.GetStatus().GetImages()
	if len(have) == 0 {
		return nil
	}
	var out []string
	for _, name := range images {
		if !slices.ContainsFunc(have, func(img *apiv1.NodeImage) bool { return img.GetName() == name }) {
			out = append(out, name)
		}
	}
	return out
}

func quotedList(set map[string]bool) string {
	names := make([]string, 0, len(set))
	for n := range set {
		names = append(names, strconv.Quote(n))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// unfit returns why c cannot take the VMI, or nil. Node state is checked
// first, then the VMI's networks (every missing one and MAC in use), and
// resources last; resources can report both cpu and memory, like
// kube-scheduler's NodeResourcesFit.
func unfit(c candidate, nd needs) []string {
	n := c.node
	switch {
	case apiv1.IsConditionTrue(n.GetStatus().GetConditions(), apiv1.ConditionNodeFenced):
		return []string{reasonFenced}
	case apiv1.FindCondition(n.GetStatus().GetConditions(), apiv1.ConditionReady).GetStatus() != apiv1.ConditionTrue:
		return []string{reasonNotReady}
	case n.GetSpec().GetUnschedulable():
		return []string{reasonCordoned}
	case !n.GetStatus().GetSchedulable():
		return []string{reasonAgentNotReady}
	case !matches(nd.sel, n.GetMetadata().GetLabels()):
		return []string{reasonSelector}
	}
	if rs := networkReasons(c, nd); len(rs) > 0 {
		return rs
	}
	if rs := storageReasons(c, nd); len(rs) > 0 {
		return rs
	}
	free := nodeAllocatable(n).minus(c.used)
	var out []string
	if free.milliCPU < nd.req.milliCPU {
		out = append(out, reasonInsufficientCPU)
	}
	if free.memory < nd.req.memory {
		out = append(out, reasonInsufficientMemory)
	}
	return out
}

func matches(sel, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// unavailableMessage renders kube-scheduler's FitError text:
// "0/2 nodes are available: 1 Insufficient memory, 1 node(s) didn't match
// node selector." with the reasons sorted as strings.
func unavailableMessage(total int, reasons map[string]int) string {
	if total == 0 {
		return "0/0 nodes are available: no nodes are registered."
	}
	parts := make([]string, 0, len(reasons))
	for r, n := range reasons {
		parts = append(parts, fmt.Sprintf("%d %s", n, r))
	}
	sort.Strings(parts)
	return fmt.Sprintf("0/%d nodes are available: %s.", total, strings.Join(parts, ", "))
}
