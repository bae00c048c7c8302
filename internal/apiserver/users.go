package apiserver

import (
	"context"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// userService serves Users: people and outside systems that hold
// credentials and bindings. Cluster-admins only (methodRules).
// noEvent is the event type of kinds without Watch.
type noEvent = struct{}

type userService struct {
	apiv1.UnimplementedUsersServer
	objects[*apiv1.User, *apiv1.ListUsersResponse, noEvent]
	s *Server
}

func newUserService(s *Server) apiv1.UsersServer {
	return &userService{s: s, objects: objects[*apiv1.User, *apiv1.ListUsersResponse, noEvent]{
		st: s.stores.Users, log: s.log, kind: apiv1.KindUser, noun: "user", attr: "user",
		listResponse: func(p store.Page[*apiv1.User]) *apiv1.ListUsersResponse {
			return &apiv1.ListUsersResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
	}}
}

func (u *userService) ready() error {
	if u.st == nil || u.s.stores.Credentials == nil {
		return errNoIdentities
	}
	return nil
}

func (u *userService) Create(ctx context.Context, req *apiv1.CreateUserRequest) (*apiv1.User, error) {
	if err := u.ready(); err != nil {
		return nil, err
	}
	in := requestCopy(req.GetUser())
	if in.Spec == nil {
		in.Spec = &apiv1.UserSpec{}
	}
	if errs := validation.ValidateUser(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindUser, in.GetMetadata().GetName(), errs)
	}
	in.Metadata = userMeta(in.Metadata)
	return u.create(ctx, in, "by", IdentityFrom(ctx).String())
}

func (u *userService) Get(ctx context.Context, req *apiv1.GetUserRequest) (*apiv1.User, error) {
	if err := u.ready(); err != nil {
		return nil, err
	}
	return getNamed(ctx, u.st, apiv1.KindUser, req.GetName())
}

func (u *userService) List(ctx context.Context, req *apiv1.ListUsersRequest) (*apiv1.ListUsersResponse, error) {
	if err := u.ready(); err != nil {
		return nil, err
	}
	return u.list(ctx, clusterList(req.GetOptions()))
}

// Update replaces labels, annotations and the spec; disabling a user
// refuses its credentials at once (usercreds.go).
func (u *userService) Update(ctx context.Context, req *apiv1.UpdateUserRequest) (*apiv1.User, error) {
	if err := u.ready(); err != nil {
		return nil, err
	}
	in := requestCopy(req.GetUser())
	if in.Spec == nil {
		in.Spec = &apiv1.UserSpec{}
	}
	if errs := validation.ValidateUser(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindUser, in.GetMetadata().GetName(), errs)
	}
	out, err := updateNamed(ctx, u.st, apiv1.KindUser, in, func(n, in *apiv1.User) bool { return replaceSpec(&n.Spec, in.Spec) })
	if err == nil {
		u.log.Info("user updated", "user", out.GetMetadata().GetName(), "disabled", out.GetSpec().GetDisabled(), "by", IdentityFrom(ctx).String())
	}
	return out, err
}

// Delete revokes the user's credentials and takes it out of every
// binding first (forgetSubject), then deletes it.
func (u *userService) Delete(ctx context.Context, req *apiv1.DeleteUserRequest) (*apiv1.User, error) {
	if err := u.ready(); err != nil {
		return nil, err
	}
	if _, err := getNamed(ctx, u.st, apiv1.KindUser, req.GetName()); err != nil {
		return nil, err
	}
	by := IdentityFrom(ctx).String()
	if err := u.s.forgetSubject(ctx, &apiv1.Subject{Kind: apiv1.SubjectUser, Name: req.GetName()}, by); err != nil {
		return nil, err
	}
	out, err := deleteNamed(ctx, u.st, apiv1.KindUser, req.GetName(), req.GetOptions())
	if err == nil {
		u.log.Info("user deleted", "user", req.GetName(), "by", by)
	}
	return out, err
}

// clusterList is the options of a list of a cluster-scoped kind: a
// namespace in them is ignored.
func clusterList(o *apiv1.ListOptions) *apiv1.ListOptions {
	if o.GetNamespace() == "" {
		return o
	}
	return &apiv1.ListOptions{LabelSelector: o.GetLabelSelector(), Limit: o.GetLimit(), Continue: o.GetContinue()}
}
