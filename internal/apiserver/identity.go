package apiserver

import (
	"context"
	"fmt"
)

// Kind is who a caller is, as authentication established it.
type Kind int

const (
	// Anonymous callers may only join with a bootstrap token.
	Anonymous Kind = iota
	// Admin callers hold the bearer token or reach the root-only unix
	// socket: users, the CLI, Terraform.
	Admin
	// Node callers present a node certificate (or, in role all, are the
	// in-process node agent): a node may act only for itself.
	Node
)

// Identity is an authenticated caller.
type Identity struct {
	Kind Kind
	// Node is the node's name for Kind Node.
	Node string
	// Serial is the hex serial of the node certificate that authenticated
	// the call (empty for the in-process node agent).
	Serial string
	// Peer says where the call came from, for logs and the anonymous
	// rate limit ("unix", "127.0.0.1").
	Peer string
	// Trusted callers (the unix socket) skip the request-rate limit.
	Trusted bool
}

func (id Identity) String() string {
	switch id.Kind {
	case Admin:
		return "admin"
	case Node:
		return "node " + id.Node
	default:
		return fmt.Sprintf("anonymous (%s)", id.Peer)
	}
}

// limitKey groups callers for rate and stream limits: one bucket per node,
// one for admins, one per anonymous address.
func (id Identity) limitKey() string {
	switch id.Kind {
	case Admin:
		return "admin"
	case Node:
		return "node/" + id.Node
	default:
		return "anonymous/" + id.Peer
	}
}

type identityKey struct{}

// WithIdentity returns ctx carrying id.
func WithIdentity(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// IdentityFrom returns the caller authentication put on ctx, or an
// anonymous one. Every listener's server options (ServerOptions) set it
// before a handler runs.
func IdentityFrom(ctx context.Context) Identity {
	if id, ok := ctx.Value(identityKey{}).(Identity); ok {
		return id
	}
	return Identity{Kind: Anonymous, Peer: "unknown"}
}
