package vmi

import (
	"log/slog"
	"sync"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// usage keeps what each node's non-final VMIs request, updated from the
// VMI informer's events. Summing a node's VMIs on every placement made
// placing n VMIs cost O(n²) (62% of the agent's CPU when placing 10,000
// VMIs, docs/performance.md); with the running totals a placement costs
// O(nodes), and a VMI's request is parsed once, not once per placement.
type usage struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	byKey  map[string]contribution // VMI cache key → what it counts for
	byNode map[string]resources
	// targets are what migrating VMIs hold on their target node until the
	// migration ends: the incoming QEMU uses as much as the source's.
	targets map[string]contribution
	// macs and ports are the MACs and host ports counted VMIs hold on
	// their nodes (holdingsOf), kept with the totals so that placement
	// never walks a node's VMIs.
	macs  *holdIndex[string, string]
	ports *holdIndex[validation.PortSlot, validation.HostPort]
}

// contribution is one VMI's request counted against its node.
type contribution struct {
	uid  string
	node string
	req  resources
	held holdings
}

// holdings are what an instance holds on its node that no other instance
// there may share: its MACs on bridges and libvirt networks, and its
// forwards' host ports.
type holdings struct {
	macs  []string              // nodeMACs
	ports []validation.HostPort // validation.SpecHostPorts
}

func holdingsOf(spec *apiv1.VirtualMachineInstanceSpec) holdings {
	return holdings{macs: nodeMACs(spec), ports: validation.SpecHostPorts(spec)}
}

func newUsage(opts Options, log *slog.Logger) *usage {
	return &usage{opts: opts, log: log, byKey: map[string]contribution{}, byNode: map[string]resources{},
		targets: map[string]contribution{}, macs: newMACIndex(), ports: newPortIndex()}
}

// hold and release count h as key's on node, or stop counting it.
func (u *usage) hold(node, key string, h holdings) {
	u.macs.add(node, key, h.macs)
	u.ports.add(node, key, h.ports)
}

func (u *usage) release(node, key string, h holdings) {
	u.macs.remove(node, key, h.macs)
	u.ports.remove(node, key, h.ports)
}

// observe accounts for v as the informer now shows it: counted on its
// node while it is placed and not final.
func (u *usage) observe(v *apiv1.VirtualMachineInstance) {
	key := informer.Key(v)
	uid := v.GetMetadata().GetUid()
	node := v.GetStatus().GetNodeName()
	u.mu.Lock()
	defer u.mu.Unlock()
	defer u.observeTarget(key, v)
	prev, had := u.byKey[key]
	if node == "" || apiv1.IsFinal(v.GetStatus().GetPhase()) {
		if had {
			u.drop(key, prev)
		}
		return
	}
	if had && prev.uid == uid && prev.node == node {
		return // the spec, and so the request, never changes
	}
	var req resources
	var held holdings
	if had && prev.uid == uid {
		req, held = prev.req, prev.held
	} else {
		var err error
		if req, err = request(v.GetSpec(), u.opts); err != nil {
			u.log.Warn("vmi on node has an unreadable request; counting overhead only", "vmi", key, "err", err)
			req = resources{memory: amount(u.opts.MemoryOverhead, 0)}
		}
		held = holdingsOf(v.GetSpec())
	}
	if had {
		u.drop(key, prev)
	}
	u.byKey[key] = contribution{uid: uid, node: node, req: req, held: held}
	u.byNode[node] = u.byNode[node].plus(req)
	u.hold(node, key, held)
}

// observeTarget counts a migrating VMI on its target node while the
// migration runs; the caller holds mu, and observe has counted the
// source already (whose request it reuses).
func (u *usage) observeTarget(key string, v *apiv1.VirtualMachineInstance) {
	st := v.GetStatus().GetMigrationState()
	target := st.GetTargetNode()
	src, counted := u.byKey[key]
	prev, had := u.targets[key]
	if !counted || st.GetCompleted() || target == "" || target == src.node {
		if had {
			u.dropFrom(u.targets, key, prev)
		}
		return
	}
	if had && prev.uid == src.uid && prev.node == target {
		return
	}
	if had {
		u.dropFrom(u.targets, key, prev)
	}
	u.targets[key] = contribution{uid: src.uid, node: target, req: src.req, held: src.held}
	u.byNode[target] = u.byNode[target].plus(src.req)
	// The incoming domain has the source's MACs and forwards: nothing
	// else may be placed there with them while it migrates.
	u.hold(target, key, src.held)
}

// forget drops a deleted VMI.
func (u *usage) forget(v *apiv1.VirtualMachineInstance) {
	key := informer.Key(v)
	u.mu.Lock()
	defer u.mu.Unlock()
	if prev, ok := u.byKey[key]; ok && prev.uid == v.GetMetadata().GetUid() {
		u.drop(key, prev)
	}
	if prev, ok := u.targets[key]; ok && prev.uid == v.GetMetadata().GetUid() {
		u.dropFrom(u.targets, key, prev)
	}
}

func (u *usage) drop(key string, c contribution) { u.dropFrom(u.byKey, key, c) }

func (u *usage) dropFrom(m map[string]contribution, key string, c contribution) {
	delete(m, key)
	u.release(c.node, key, c.held)
	left := u.byNode[c.node].minus(c.req)
	if left == (resources{}) {
		delete(u.byNode, c.node)
		return
	}
	u.byNode[c.node] = left
}

// counted reports whether the VMI key with uid is counted on a node.
func (u *usage) counted(key, uid string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	c, ok := u.byKey[key]
	return ok && c.uid == uid
}

// onNode is what node's counted VMIs request.
func (u *usage) onNode(node string) resources {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.byNode[node]
}

// inUse adds to macs and ports, per node, those of h's that an instance
// other than self holds there (an overlapping port, for ports); a nil map
// is not looked for.
func (u *usage) inUse(self string, h holdings, macs map[string][]string, ports map[string][]validation.HostPort) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if macs != nil {
		u.macs.heldByOthers(self, h.macs, macs)
	}
	if ports != nil {
		u.ports.heldByOthers(self, h.ports, ports)
	}
}
