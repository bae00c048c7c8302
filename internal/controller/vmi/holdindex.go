package vmi

import (
	"slices"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// holdIndex says which instances hold which things T on which node, of
// those no two instances there may share (holdings: MACs, host ports):
// those usage counts there (placed, not final; migration targets
// included). Keys are VMI cache keys, which are their VMs' too (a VM's
// instance has its name), so an instance replacing its predecessor on
// the node does not clash with it. By slot: a placement looks up its own
// few things once, whatever the number of nodes and instances, and
// compares them (clash) only with those of their slot.
type holdIndex[S, T comparable] struct {
	slotOf func(T) S
	clash  func(a, b T) bool
	bySlot map[S][]holder[T]
}

type holder[T comparable] struct {
	node, key string
	v         T
}

// newMACIndex files MACs by themselves: only the same MAC clashes.
func newMACIndex() *holdIndex[string, string] {
	return &holdIndex[string, string]{bySlot: map[string][]holder[string]{},
		slotOf: func(mac string) string { return mac },
		clash:  func(a, b string) bool { return a == b }}
}

// newPortIndex files host ports by their protocol and port, which every
// host port they overlap shares.
func newPortIndex() *holdIndex[validation.PortSlot, validation.HostPort] {
	return &holdIndex[validation.PortSlot, validation.HostPort]{bySlot: map[validation.PortSlot][]holder[validation.HostPort]{},
		slotOf: validation.HostPort.Slot, clash: validation.HostPort.Overlaps}
}

func (m *holdIndex[S, T]) add(node, key string, vs []T) {
	for _, v := range vs {
		s := m.slotOf(v)
		m.bySlot[s] = append(m.bySlot[s], holder[T]{node, key, v})
	}
}

// remove takes one of key's holdings away: a migrating instance holds
// its things on its target node twice for a moment, as the target and,
// once the instance moved there, as its node; the target's end must
// leave the other.
func (m *holdIndex[S, T]) remove(node, key string, vs []T) {
	for _, v := range vs {
		s := m.slotOf(v)
		i := slices.Index(m.bySlot[s], holder[T]{node, key, v})
		if i < 0 {
			continue
		}
		left := slices.Delete(m.bySlot[s], i, i+1)
		if len(left) == 0 {
			delete(m.bySlot, s)
			continue
		}
		m.bySlot[s] = left
	}
}

// heldByOthers adds to byNode, per node, those of vs that clash with
// what an instance other than self holds there.
func (m *holdIndex[S, T]) heldByOthers(self string, vs []T, byNode map[string][]T) {
	for _, v := range vs {
		for _, h := range m.bySlot[m.slotOf(v)] {
			if h.key != self && m.clash(h.v, v) {
				addOnce(byNode, h.node, v)
			}
		}
	}
}

// clashing adds to byNode[node] those of vs that clash with one of
// theirs, another instance's there: a reservation, which no index counts
// yet. It reads m's rule, not its holdings: no lock needed.
func (m *holdIndex[S, T]) clashing(vs, theirs []T, node string, byNode map[string][]T) {
	for _, v := range vs {
		if slices.ContainsFunc(theirs, func(t T) bool { return m.clash(t, v) }) {
			addOnce(byNode, node, v)
		}
	}
}

func addOnce[T comparable](byNode map[string][]T, node string, v T) {
	if !slices.Contains(byNode[node], v) {
		byNode[node] = append(byNode[node], v)
	}
}
