package guestnet

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
)

// Storage endpoints: on a hyperconverged host the storage QEMU opens
// itself (a Ceph cluster's monitors and OSDs) listens on the host's own
// addresses, which the table refuses to QEMU's user. Nothing on a socket
// tells QEMU's own connections from a guest's (both are the QEMU process;
// librados binds no source address of its own), so the exception is by
// destination: exactly the address and port pairs the node's storage
// uses, in two named sets that the first rules of guest_to_host accept.
// Guests reach those endpoints then, and nothing else of the host: the
// same ones every guest on every other node reaches already, since the
// table never restricts remote addresses. The caller (the node agent's
// storage room) decides what they are; this package knows nothing of
// Ceph.
const (
	setStorage4 = "storage4"
	setStorage6 = "storage6"
)

// endpoints are storage endpoints, sorted and unique, IPv4 unmapped.
type endpoints []netip.AddrPort

func newEndpoints(eps []netip.AddrPort) endpoints {
	out := make(endpoints, 0, len(eps))
	for _, ep := range eps {
		if !ep.IsValid() || ep.Port() == 0 {
			continue
		}
		out = append(out, netip.AddrPortFrom(ep.Addr().Unmap().WithZone(""), ep.Port()))
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out)
}

// storageSets are the two sets, empty.
func storageSets() []*set {
	return []*set{
		{Family: family, Table: Table, Name: setStorage4, Type: []string{"ipv4_addr", "inet_service"}},
		{Family: family, Table: Table, Name: setStorage6, Type: []string{"ipv6_addr", "inet_service"}},
	}
}

// elements are eps's elements of the IPv4 set and of the IPv6 one.
func (eps endpoints) elements() (v4, v6 []any) {
	for _, ep := range eps {
		e := concatExpr{[]any{ep.Addr().String(), int(ep.Port())}}
		if ep.Addr().Is4() {
			v4 = append(v4, e)
		} else {
			v6 = append(v6, e)
		}
	}
	return v4, v6
}

// addElements are the commands that add eps to the (empty) sets; nft
// refuses an empty element list, so a set without any gets none.
func (eps endpoints) addElements() []entry {
	v4, v6 := eps.elements()
	var cmds []entry
	for _, s := range []struct {
		name string
		elem []any
	}{{setStorage4, v4}, {setStorage6, v6}} {
		if len(s.elem) > 0 {
			cmds = append(cmds, entry{Add: &object{Element: &set{Family: family, Table: Table, Name: s.name, Elem: s.elem}}})
		}
	}
	return cmds
}

// replaceDocument empties both sets and fills them with eps, in one
// transaction: a connection never sees a set half updated, and the rules
// stay as they are.
func (eps endpoints) replaceDocument() document {
	var cmds []entry
	for _, s := range storageSets() {
		cmds = append(cmds, entry{Flush: &object{Set: &set{Family: family, Table: Table, Name: s.Name}}})
	}
	return document{Nftables: append(cmds, eps.addElements()...)}
}

// verify compares the sets of a listing with eps and says what differs
// ("" when nothing does).
func (eps endpoints) verify(listed []*set) string {
	want := map[string]*set{}
	for _, s := range storageSets() {
		want[s.Name] = s
	}
	var got endpoints
	seen := map[string]bool{}
	for _, s := range listed {
		w := want[s.Name]
		if w == nil {
			return "set " + s.Name + " is not the firewall's"
		}
		seen[s.Name] = true
		if fmt.Sprint(s.Type) != fmt.Sprint(w.Type) {
			return fmt.Sprintf("set %s is of type %v, want %v", s.Name, s.Type, w.Type)
		}
		for _, e := range s.Elem {
			ep, ok := listedEndpoint(e)
			if !ok || ep.Addr().Is4() != (s.Name == setStorage4) {
				return fmt.Sprintf("set %s holds an element that is not an address and port: %v", s.Name, e)
			}
			got = append(got, ep)
		}
	}
	for name := range want {
		if !seen[name] {
			return "set " + name + " is missing"
		}
	}
	if got = newEndpoints(got); !slices.Equal(got, eps) {
		return fmt.Sprintf("the storage sets hold %v, want %v", got, eps)
	}
	return ""
}

// listedEndpoint reads an element as `nft -j list` prints one of the
// sets: {"concat": ["10.1.2.3", 6800]}.
func listedEndpoint(e any) (netip.AddrPort, bool) {
	m, ok := e.(map[string]any)
	if !ok {
		return netip.AddrPort{}, false
	}
	parts, ok := m["concat"].([]any)
	if !ok || len(parts) != 2 {
		return netip.AddrPort{}, false
	}
	s, ok := parts[0].(string)
	if !ok {
		return netip.AddrPort{}, false
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.AddrPort{}, false
	}
	var port uint64
	switch p := parts[1].(type) {
	case float64:
		if p < 1 || p > 65535 || p != float64(uint16(p)) {
			return netip.AddrPort{}, false
		}
		port = uint64(p)
	case string:
		if port, err = strconv.ParseUint(p, 10, 16); err != nil {
			return netip.AddrPort{}, false
		}
	default:
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)), true
}

// SetStorageEndpoints makes eps the address and port pairs QEMU's user
// may open TCP connections to on this host's own addresses (any others in
// eps never reach the table's checks: it sees only local destinations).
// The table keeps them from then on: Ensure and Run put them back with
// the rest. A change replaces the sets' elements in one transaction; a
// table that is missing or differs otherwise is installed whole.
func (f *Firewall) SetStorageEndpoints(ctx context.Context, eps []netip.AddrPort) error {
	next := newEndpoints(eps)
	f.mu.Lock()
	defer f.mu.Unlock()
	if slices.Equal(next, f.eps) {
		return nil
	}
	prev := f.eps
	// What the table must hold from now on, even if this fails: Run
	// tries again.
	f.eps = next
	listing, err := f.nft.listTable(ctx)
	if err != nil {
		return fmt.Errorf("guest firewall: %w", err)
	}
	doc := installDocument(f.rules, next)
	if listing != nil {
		if why, err := verify(listing, f.rules, prev); err == nil && why == "" {
			doc = next.replaceDocument()
		}
	}
	if err := f.nft.apply(ctx, doc); err != nil {
		return fmt.Errorf("guest firewall: setting the storage endpoints: %w", err)
	}
	f.installed = true
	f.log.Info("guest firewall: QEMU may connect to these storage endpoints on this host", "endpoints", next)
	return nil
}
