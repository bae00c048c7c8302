package apiserver

import (
	"context"
	"crypto/subtle"
	"net"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// Listener says how callers of one listener authenticate.
type Listener struct {
	// Unix marks the root-only (0600) unix socket: its callers are admins.
	Unix bool
	// Token returns the admins' bearer token on a TLS listener (users'
	// and service accounts' tokens, apiv1.TokenPrefix, are their
	// Credential records'); it is
	// asked on every call, so a rotated token takes effect at once.
	Token func() string
}

// authenticate decides who is calling, from the connection and the
// headers only: it runs in the transport's tap handle, before grpc reads
// a byte of the request body.
func (s *Server) authenticate(ctx context.Context, l Listener, info *tap.Info) (Identity, error) {
	if l.Unix {
		if v := info.Header.Get(apiv1.NodeHeader); len(v) > 0 {
			if v[0] == "" {
				return Identity{}, status.Error(codes.Unauthenticated, apiv1.NodeHeader+": empty node name")
			}
			return Identity{Kind: Node, Node: v[0], Peer: "unix", Trusted: true}, nil
		}
		return Identity{Kind: Admin, Peer: "unix", Trusted: true}, nil
	}
	p, _ := peer.FromContext(ctx)
	addr := "unknown"
	if p != nil && p.Addr != nil {
		addr = p.Addr.String()
		if host, _, err := net.SplitHostPort(addr); err == nil {
			addr = host
		}
	}
	if p != nil {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.VerifiedChains) > 0 {
			leaf := ti.State.VerifiedChains[0][0]
			serial := pki.SerialHex(leaf)
			if kind, ns, name, ok := pki.UserSubject(leaf); ok {
				id, err := s.users.authenticateCert(kind, ns, name, serial)
				id.Peer = addr
				return id, err
			}
			node, ok := pki.NodeName(leaf)
			if !ok {
				return Identity{}, status.Error(codes.Unauthenticated, "client certificate is neither a node's nor a user's")
			}
			if err := s.creds.check(node, serial); err != nil {
				return Identity{}, err
			}
			return Identity{Kind: Node, Node: node, Serial: serial, Peer: addr}, nil
		}
	}
	if vals := info.Header.Get("authorization"); len(vals) > 0 {
		tok, ok := strings.CutPrefix(vals[0], "Bearer ")
		if ok && strings.HasPrefix(tok, apiv1.TokenPrefix) {
			id, err := s.users.authenticateToken(tok)
			id.Peer = addr
			return id, err
		}
		want := ""
		if l.Token != nil {
			want = l.Token()
		}
		if !ok || want == "" || subtle.ConstantTimeCompare([]byte(tok), []byte(want)) != 1 {
			return Identity{}, status.Error(codes.Unauthenticated, "invalid bearer token")
		}
		return Identity{Kind: Admin, Peer: addr}, nil
	}
	if info.FullMethodName == apiv1.Bootstrap_Join_FullMethodName {
		return Identity{Kind: Anonymous, Peer: addr}, nil
	}
	return Identity{}, status.Error(codes.Unauthenticated,
		"no credential: admins set VIRTPLANE_TOKEN or --token-file; nodes join with a bootstrap token (virtplane-agent node join)")
}

// tapHandle decides a call before its body is read, from the connection
// and the headers: who calls (authenticate), the caller's request rate,
// whether it may call the method at all (authorize, the method-level part
// of authz.go's table) and the calls it has in flight. grpc
// runs it in the transport (http2_server.go operateHeaders) as the
// stream's headers arrive; a refusal answers the stream at once and the
// transport drops the body's DATA frames, so a refused call costs no more
// than its headers.
func (s *Server) tapHandle(l Listener) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		method := info.FullMethodName
		id, err := s.authenticate(ctx, l, info)
		if err != nil {
			s.limits.refused(method, "unauthenticated")
			s.auditRefused(ctx, info, Identity{}, err)
			return nil, err
		}
		if err := s.limits.allow(id, method); err != nil {
			return nil, err
		}
		if _, err := s.authorize(ctx, id, method); err != nil {
			s.limits.refused(method, "forbidden")
			s.auditRefused(ctx, info, id, err)
			return nil, err
		}
		release, err := s.limits.startRequest(id, method)
		if err != nil {
			return nil, err
		}
		// The count ends when the handler returns (requestDone) or a
		// stream's request has been read (requestRead); on paths that
		// reach neither (a request that fails to decode, an unknown
		// method) when the transport cancels the stream's context, as it
		// does however a stream ends.
		context.AfterFunc(ctx, release)
		ctx = context.WithValue(ctx, requestSlotKey{}, release)
		ctx = WithIdentity(ctx, id)
		switch {
		case id.Kind == Node && id.Serial != "":
			// A revocation cancels the node's open calls and streams.
			ctx = s.creds.track(ctx, id)
		case id.Credential != "":
			// So does a user's or service account's.
			ctx = s.users.track(ctx, id)
		}
		return ctx, nil
	}
}
