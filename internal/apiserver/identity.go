package apiserver

import (
	"context"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Kind is who a caller is, as authentication established it.
type Kind int

const (
	// Anonymous callers may only join with a bootstrap token.
	Anonymous Kind = iota
	// Admin callers hold the bootstrap admin bearer token or reach the
	// root-only unix socket: cluster-admins without a user record.
	Admin
	// Node callers present a node certificate (or, in role all, are the
	// in-process node agent): a node may act only for itself.
	Node
	// User callers hold a credential of a User record: what they may do
	// is what their role bindings give them (roles.go).
	User
	// ServiceAccount callers hold a credential of a namespace's service
	// account; they are bound to roles as users are.
	ServiceAccount
)

// Identity is an authenticated caller.
type Identity struct {
	Kind Kind
	// Node is the node's name for Kind Node.
	Node string
	// Name is the user's or service account's name; Namespace the
	// service account's namespace.
	Name, Namespace string
	// Credential is the name of the Credential record that authenticated
	// a user or service account; its open calls end when it is revoked.
	Credential string
	// Expires is when that credential stops being accepted.
	Expires time.Time
	// Serial is the hex serial of the certificate that authenticated the
	// call: a node's (empty for the in-process node agent) or a user's.
	Serial string
	// Peer says where the call came from, for logs and the anonymous
	// rate limit ("unix", "127.0.0.1").
	Peer string
	// Trusted callers (the unix socket) skip the request-rate limit.
	Trusted bool
}

// String names the caller in errors and audit records: "admin",
// "node n1", "user alice", "serviceaccount ci/deployer".
func (id Identity) String() string {
	switch id.Kind {
	case Admin:
		return "admin"
	case Node:
		return "node " + id.Node
	case User:
		return "user " + id.Name
	case ServiceAccount:
		return "serviceaccount " + id.Namespace + "/" + id.Name
	default:
		return fmt.Sprintf("anonymous (%s)", id.Peer)
	}
}

// Subject is the binding subject of a user or service account, nil for
// every other caller.
func (id Identity) Subject() *apiv1.Subject {
	switch id.Kind {
	case User:
		return &apiv1.Subject{Kind: apiv1.SubjectUser, Name: id.Name}
	case ServiceAccount:
		return &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Name: id.Name, Namespace: id.Namespace}
	}
	return nil
}

// limitKey groups callers for rate and stream limits: one bucket per node,
// one for admins, one per user and service account, one per anonymous
// address.
func (id Identity) limitKey() string {
	switch id.Kind {
	case Admin:
		return "admin"
	case Node:
		return "node/" + id.Node
	case User:
		return "user/" + id.Name
	case ServiceAccount:
		return "serviceaccount/" + id.Namespace + "/" + id.Name
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
