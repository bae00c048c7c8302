package guestnet

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
)

// The table and chains the firewall owns. The table is the firewall's
// alone: every install replaces it whole, so rules added to it by hand
// are dropped.
const (
	Table       = "virtplane_guestnet"
	family      = "inet" // IPv4 and IPv6 in one table
	chainOutput = "output"
	chainGuest  = "guest_to_host"
)

// What follows models the part of nft's JSON format
// (libnftables-json(5)) this ruleset uses: typed, so no rule is ever a
// string built by hand.

// document is an nft JSON document: commands to run (add, delete) or, in
// `nft -j list` output, the objects listed (table, chain, rule and a
// metainfo this package ignores).
type document struct {
	Nftables []entry `json:"nftables"`
}

type entry struct {
	Add    *object `json:"add,omitempty"`
	Delete *object `json:"delete,omitempty"`
	Flush  *object `json:"flush,omitempty"`
	object
}

type object struct {
	Table *table `json:"table,omitempty"`
	Set   *set   `json:"set,omitempty"`
	Chain *chain `json:"chain,omitempty"`
	Rule  *rule  `json:"rule,omitempty"`
	// Element adds to a set (a command only): Name is the set's, Elem
	// the elements.
	Element *set `json:"element,omitempty"`
}

type table struct {
	Family string `json:"family"`
	Name   string `json:"name"`
}

// set is a named set; Type is its key's type ([]string for a
// concatenation); Elem are its elements (concat values here).
type set struct {
	Family string `json:"family"`
	Table  string `json:"table"`
	Name   string `json:"name"`
	Type   any    `json:"type,omitempty"`
	Elem   []any  `json:"elem,omitempty"`
}

type chain struct {
	Family string `json:"family"`
	Table  string `json:"table"`
	Name   string `json:"name"`
	Type   string `json:"type,omitempty"`
	Hook   string `json:"hook,omitempty"`
	Prio   *int   `json:"prio,omitempty"`
	Policy string `json:"policy,omitempty"`
}

type rule struct {
	Family string `json:"family"`
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	// Expr is written, never read back: a listed rule is recognised by
	// its comment (see verify).
	Expr    []any  `json:"expr,omitempty"`
	Comment string `json:"comment,omitempty"`
}

// Expressions and statements.

type match struct {
	Match matchExpr `json:"match"`
}

type matchExpr struct {
	Op    string `json:"op"`
	Left  any    `json:"left"`
	Right any    `json:"right"`
}

type metaExpr struct {
	Meta struct {
		Key string `json:"key"`
	} `json:"meta"`
}

type fibExpr struct {
	Fib struct {
		Result string   `json:"result"`
		Flags  []string `json:"flags"`
	} `json:"fib"`
}

type payloadExpr struct {
	Payload struct {
		Protocol string `json:"protocol"`
		Field    string `json:"field"`
	} `json:"payload"`
}

type ctExpr struct {
	Ct struct {
		Key string `json:"key"`
	} `json:"ct"`
}

// concatExpr joins expressions (a set's key, as in "ip daddr . tcp
// dport") or values (an element of such a set).
type concatExpr struct {
	Concat []any `json:"concat"`
}

type andExpr struct {
	And [2]any `json:"&"`
}

type setExpr struct {
	Set []any `json:"set"`
}

type acceptStmt struct {
	Accept *struct{} `json:"accept"` // null
}

type jumpStmt struct {
	Jump struct {
		Target string `json:"target"`
	} `json:"jump"`
}

type counterStmt struct {
	Counter struct {
		Packets uint64 `json:"packets"`
		Bytes   uint64 `json:"bytes"`
	} `json:"counter"`
}

type rejectStmt struct {
	Reject *rejectSpec `json:"reject"` // null: the family's default
}

type rejectSpec struct {
	Type string `json:"type"`
}

func eq(left, right any) match { return match{matchExpr{Op: "==", Left: left, Right: right}} }

func meta(key string) metaExpr {
	var m metaExpr
	m.Meta.Key = key
	return m
}

func ct(key string) ctExpr {
	var c ctExpr
	c.Ct.Key = key
	return c
}

func fibDaddrType() fibExpr {
	var f fibExpr
	f.Fib.Result, f.Fib.Flags = "type", []string{"daddr"}
	return f
}

func payload(protocol, field string) payloadExpr {
	var p payloadExpr
	p.Payload.Protocol, p.Payload.Field = protocol, field
	return p
}

func jump(target string) jumpStmt {
	var j jumpStmt
	j.Jump.Target = target
	return j
}

// rules returns the firewall's rules for QEMU running as uids, in order:
//
//	output:        meta skuid {uids} fib daddr type local jump guest_to_host
//	guest_to_host: ip daddr . tcp dport @storage4 accept
//	               ip6 daddr . tcp dport @storage6 accept
//	               meta l4proto {tcp, udp} th dport 53 accept
//	               tcp flags & (fin|syn|rst|ack) == syn counter reject with tcp reset
//	               meta l4proto tcp accept
//	               meta l4proto udp ct direction reply accept
//	               counter reject
//
// Each comment says why and ends in a digest of all the rules, which is
// how verify recognises them in a listing.
func rules(uids []uint32) []rule {
	uidSet := make([]any, len(uids))
	for i, u := range uids {
		uidSet[i] = u
	}
	mk := func(ch string, expr ...any) rule {
		return rule{Family: family, Table: Table, Chain: ch, Expr: expr}
	}
	rs := []rule{
		// Only sockets of the QEMU user, and only to this host's own
		// addresses (loopback and every other address of the
		// namespace): slirp maps the guest's 10.0.2.2 and fec0::2 to
		// 127.0.0.1 and ::1, and passes other destinations through.
		mk(chainOutput, eq(meta("skuid"), setExpr{uidSet}), eq(fibDaddrType(), "local"), jump(chainGuest)),
		// The storage QEMU itself uses on this host (a hyperconverged
		// node's Ceph monitors and OSDs, SetStorageEndpoints): exact
		// address and port pairs, first, since nothing tells QEMU's own
		// connections from its guests' (docs/notes/storage-probes.md).
		mk(chainGuest, eq(concatExpr{[]any{payload("ip", "daddr"), payload("tcp", "dport")}}, "@"+setStorage4), acceptStmt{}),
		mk(chainGuest, eq(concatExpr{[]any{payload("ip6", "daddr"), payload("tcp", "dport")}}, "@"+setStorage6), acceptStmt{}),
		// slirp forwards the guest's DNS (10.0.2.3) to the host's
		// resolver, which may listen on loopback (127.0.0.53).
		mk(chainGuest, eq(meta("l4proto"), setExpr{[]any{"tcp", "udp"}}), eq(payload("th", "dport"), 53), acceptStmt{}),
		// New TCP connections: what a guest opens.
		mk(chainGuest, eq(andExpr{[2]any{payload("tcp", "flags"), []string{"fin", "syn", "rst", "ack"}}}, "syn"),
			counterStmt{}, rejectStmt{&rejectSpec{Type: "tcp reset"}}),
		// The rest of TCP: segments of connections QEMU accepted (a
		// VNC or hostfwd listener's replies) or had before the table.
		mk(chainGuest, eq(meta("l4proto"), "tcp"), acceptStmt{}),
		// UDP answers of QEMU's own sockets to what a host process sent
		// them first: a UDP port forward's replies to its client. A
		// datagram the guest sends to the host goes out of a new slirp
		// socket, in conntrack's original direction, and stays refused.
		mk(chainGuest, eq(meta("l4proto"), "udp"), eq(ct("direction"), "reply"), acceptStmt{}),
		// UDP and anything else.
		mk(chainGuest, counterStmt{}, rejectStmt{}),
	}
	why := []string{
		"QEMU to this host's own addresses",
		"storage endpoints QEMU uses (IPv4)",
		"storage endpoints QEMU uses (IPv6)",
		"DNS: slirp forwards the guest's to the host's resolver",
		"new TCP connections from guests",
		"replies of QEMU's own listeners",
		"UDP replies of QEMU's own sockets (port forwards)",
		"UDP and the rest",
	}
	sum := digest(rs)
	for i := range rs {
		rs[i].Comment = fmt.Sprintf("virtplane guestnet: %s [%s]", why[i], sum)
	}
	return rs
}

// digest is a short hash of the rules, comments left out.
func digest(rs []rule) string {
	b, err := json.Marshal(rs)
	if err != nil {
		panic(err) // only this package's own types
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:6])
}

var prioFilter = 0 // "priority filter"

// installDocument replaces the table with one holding rs and the storage
// endpoints eps, in one nft transaction: adding the table first makes the
// delete succeed when it is absent, and no packet ever sees a half-built
// table.
func installDocument(rs []rule, eps endpoints) document {
	t := &table{Family: family, Name: Table}
	cmds := []entry{
		{Add: &object{Table: t}},
		{Delete: &object{Table: t}},
		{Add: &object{Table: t}},
	}
	for _, s := range storageSets() {
		cmds = append(cmds, entry{Add: &object{Set: s}})
	}
	cmds = append(cmds,
		entry{Add: &object{Chain: &chain{Family: family, Table: Table, Name: chainOutput,
			Type: "filter", Hook: "output", Prio: &prioFilter, Policy: "accept"}}},
		entry{Add: &object{Chain: &chain{Family: family, Table: Table, Name: chainGuest}}})
	for i := range rs {
		cmds = append(cmds, entry{Add: &object{Rule: &rs[i]}})
	}
	return document{Nftables: append(cmds, eps.addElements()...)}
}

// verify compares a `nft -j list table` listing with the rules and the
// storage endpoints it should hold and says what differs ("" when nothing
// does). Rules are matched by their comments, in order; a chain must
// carry exactly those rules, the output chain must still be the hook the
// table installed, and the storage sets exactly eps.
func verify(listing []byte, want []rule, eps endpoints) (string, error) {
	var doc document
	if err := json.Unmarshal(listing, &doc); err != nil {
		return "", fmt.Errorf("reading nft's listing: %w", err)
	}
	chains := map[string]*chain{}
	got := map[string][]string{}
	var sets []*set
	for _, e := range doc.Nftables {
		switch {
		case e.Set != nil && e.Set.Table == Table:
			sets = append(sets, e.Set)
		case e.Chain != nil && e.Chain.Table == Table:
			chains[e.Chain.Name] = e.Chain
		case e.Rule != nil && e.Rule.Table == Table:
			got[e.Rule.Chain] = append(got[e.Rule.Chain], e.Rule.Comment)
		}
	}
	out := chains[chainOutput]
	switch {
	case out == nil:
		return "chain " + chainOutput + " is missing", nil
	case out.Type != "filter" || out.Hook != "output" || out.Prio == nil || *out.Prio != prioFilter || out.Policy != "accept":
		return fmt.Sprintf("chain %s is not a filter hook on output at priority %d with policy accept", chainOutput, prioFilter), nil
	case chains[chainGuest] == nil:
		return "chain " + chainGuest + " is missing", nil
	}
	wantByChain := map[string][]string{}
	for _, r := range want {
		wantByChain[r.Chain] = append(wantByChain[r.Chain], r.Comment)
	}
	for _, name := range []string{chainOutput, chainGuest} {
		if !slices.Equal(got[name], wantByChain[name]) {
			return fmt.Sprintf("chain %s holds other rules (%d, want %d)", name, len(got[name]), len(wantByChain[name])), nil
		}
	}
	for name := range got {
		if name != chainOutput && name != chainGuest {
			return "chain " + name + " is not the firewall's", nil
		}
	}
	for name := range chains {
		if name != chainOutput && name != chainGuest {
			return "chain " + name + " is not the firewall's", nil
		}
	}
	return eps.verify(sets), nil
}
