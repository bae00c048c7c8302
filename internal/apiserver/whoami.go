package apiserver

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// authService answers callers about themselves: who they are, with which
// roles, and whether they may call a method in a namespace.
type authService struct {
	apiv1.UnimplementedAuthServer
	s *Server
}

func newAuthService(s *Server) apiv1.AuthServer { return &authService{s: s} }

func (a *authService) WhoAmI(ctx context.Context, _ *apiv1.WhoAmIRequest) (*apiv1.WhoAmIResponse, error) {
	id := IdentityFrom(ctx)
	// The stored bindings, not the caches, which follow them a moment
	// late: a binding made just before is one the caller holds.
	g, ok := a.s.roles.storedGrantsOf(ctx, id)
	if !ok {
		var err error
		if g, err = a.s.roles.grantsOf(id); err != nil {
			return nil, err
		}
	}
	out := &apiv1.WhoAmIResponse{Identity: id.String(), Subject: id.Subject(), Credential: id.Credential, Roles: g.roles()}
	if !id.Expires.IsZero() {
		out.Expires = timestamppb.New(id.Expires)
	}
	return out, nil
}

// CanI decides as a call would: the method's rule, and for a namespaced
// one the role in the namespace asked about ("" is all namespaces). For
// the rules whose namespace comes from a stored object (images, a
// service account's credentials) the namespace asked about stands for
// the owner's.
func (a *authService) CanI(ctx context.Context, req *apiv1.CanIRequest) (*apiv1.CanIResponse, error) {
	method := fullMethod(req.GetMethod())
	rule, ok := methodRules[method]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "method: %q is no method of the API (give \"VirtualMachines.Create\" or \"/virtplane.v1.VirtualMachines/Create\")", req.GetMethod())
	}
	id := IdentityFrom(ctx)
	var err error
	switch id.Kind {
	case Node:
		_, err = a.s.authorize(ctx, id, method)
	default:
		ns := req.GetNamespace()
		_, err = a.s.roles.decide(ctx, id, func(g grants) error {
			if err := rule.allowsMethod(id, g, method); err != nil || rule.scope != scopeNamespace {
				return err
			}
			return rule.allowsIn(id, g, method, target{ns: ns, all: ns == ""})
		})
		if status.Code(err) == codes.Unavailable {
			return nil, err
		}
	}
	if err != nil {
		return &apiv1.CanIResponse{Reason: status.Convert(err).Message()}, nil
	}
	return &apiv1.CanIResponse{Allowed: true}, nil
}

// fullMethod is "/virtplane.v1.VirtualMachines/Create" for that or
// "VirtualMachines.Create".
func fullMethod(m string) string {
	if strings.HasPrefix(m, "/") {
		return m
	}
	svc, name, ok := strings.Cut(m, ".")
	if !ok {
		return m
	}
	return "/virtplane.v1." + svc + "/" + name
}
