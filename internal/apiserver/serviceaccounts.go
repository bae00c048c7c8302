package apiserver

import (
	"context"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// serviceAccountService serves ServiceAccounts: a namespace's identities
// for automation, managed by its admins, read by its viewers.
type serviceAccountService struct {
	apiv1.UnimplementedServiceAccountsServer
	objects[*apiv1.ServiceAccount, *apiv1.ListServiceAccountsResponse, noEvent]
	s *Server
}

func newServiceAccountService(s *Server) apiv1.ServiceAccountsServer {
	return &serviceAccountService{s: s, objects: objects[*apiv1.ServiceAccount, *apiv1.ListServiceAccountsResponse, noEvent]{
		st: s.stores.ServiceAccounts, log: s.log, kind: apiv1.KindServiceAccount, noun: "service account", attr: "serviceaccount",
		listResponse: func(p store.Page[*apiv1.ServiceAccount]) *apiv1.ListServiceAccountsResponse {
			return &apiv1.ListServiceAccountsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
	}}
}

func (v *serviceAccountService) ready() error {
	if v.st == nil || v.s.stores.Credentials == nil {
		return errNoIdentities
	}
	return nil
}

// defaultServiceAccount is in, with a spec, in the default namespace
// unless it names one (as authorization read it).
func defaultServiceAccount(in *apiv1.ServiceAccount) *apiv1.ServiceAccount {
	if in.Metadata == nil {
		in.Metadata = &apiv1.ObjectMeta{}
	}
	if in.Metadata.Namespace == "" {
		in.Metadata.Namespace = apiv1.DefaultNamespace
	}
	if in.Spec == nil {
		in.Spec = &apiv1.ServiceAccountSpec{}
	}
	return in
}

func (v *serviceAccountService) Create(ctx context.Context, req *apiv1.CreateServiceAccountRequest) (*apiv1.ServiceAccount, error) {
	if err := v.ready(); err != nil {
		return nil, err
	}
	in := defaultServiceAccount(requestCopy(req.GetServiceAccount()))
	if errs := validation.ValidateServiceAccount(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindServiceAccount, in.GetMetadata().GetName(), errs)
	}
	in.Metadata = userMeta(in.Metadata)
	return v.create(ctx, in, "by", IdentityFrom(ctx).String())
}

func (v *serviceAccountService) Get(ctx context.Context, req *apiv1.GetServiceAccountRequest) (*apiv1.ServiceAccount, error) {
	if err := v.ready(); err != nil {
		return nil, err
	}
	return v.get(ctx, req.GetKey())
}

func (v *serviceAccountService) List(ctx context.Context, req *apiv1.ListServiceAccountsRequest) (*apiv1.ListServiceAccountsResponse, error) {
	if err := v.ready(); err != nil {
		return nil, err
	}
	return v.list(ctx, req.GetOptions())
}

func (v *serviceAccountService) Update(ctx context.Context, req *apiv1.UpdateServiceAccountRequest) (*apiv1.ServiceAccount, error) {
	if err := v.ready(); err != nil {
		return nil, err
	}
	in := defaultServiceAccount(requestCopy(req.GetServiceAccount()))
	if errs := validation.ValidateServiceAccount(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindServiceAccount, in.GetMetadata().GetName(), errs)
	}
	return v.update(ctx, in, func(_, _ *apiv1.ServiceAccount) error { return nil },
		func(n, in *apiv1.ServiceAccount) bool { return replaceSpec(&n.Spec, in.Spec) })
}

// Delete revokes the account's credentials and takes it out of every
// binding first (forgetSubject), then deletes it.
func (v *serviceAccountService) Delete(ctx context.Context, req *apiv1.DeleteServiceAccountRequest) (*apiv1.ServiceAccount, error) {
	if err := v.ready(); err != nil {
		return nil, err
	}
	sa, err := v.get(ctx, req.GetKey())
	if err != nil {
		return nil, err
	}
	md := sa.GetMetadata()
	sub := &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: md.GetNamespace(), Name: md.GetName()}
	if err := v.s.forgetSubject(ctx, sub, IdentityFrom(ctx).String()); err != nil {
		return nil, err
	}
	return v.delete(ctx, req.GetKey(), req.GetOptions(), "by", IdentityFrom(ctx).String())
}
