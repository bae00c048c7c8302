package apiserver

import (
	"context"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// roleBindingService serves RoleBindings: a namespace's admins give
// subjects admin, edit or view there (roles.go resolves them).
type roleBindingService struct {
	apiv1.UnimplementedRoleBindingsServer
	objects[*apiv1.RoleBinding, *apiv1.ListRoleBindingsResponse, noEvent]
}

func newRoleBindingService(s *Server) apiv1.RoleBindingsServer {
	return &roleBindingService{objects: objects[*apiv1.RoleBinding, *apiv1.ListRoleBindingsResponse, noEvent]{
		st: s.stores.RoleBindings, log: s.log, kind: apiv1.KindRoleBinding, noun: "role binding", attr: "rolebinding",
		listResponse: func(p store.Page[*apiv1.RoleBinding]) *apiv1.ListRoleBindingsResponse {
			return &apiv1.ListRoleBindingsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
	}}
}

func defaultRoleBinding(in *apiv1.RoleBinding) *apiv1.RoleBinding {
	if in.Metadata == nil {
		in.Metadata = &apiv1.ObjectMeta{}
	}
	if in.Metadata.Namespace == "" {
		in.Metadata.Namespace = apiv1.DefaultNamespace
	}
	return in
}

func (v *roleBindingService) Create(ctx context.Context, req *apiv1.CreateRoleBindingRequest) (*apiv1.RoleBinding, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	in := defaultRoleBinding(requestCopy(req.GetRoleBinding()))
	if errs := validation.ValidateRoleBinding(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindRoleBinding, in.GetMetadata().GetName(), errs)
	}
	in.Metadata = userMeta(in.Metadata)
	return v.create(ctx, in, "role", in.GetSpec().GetRole(), "by", IdentityFrom(ctx).String())
}

func (v *roleBindingService) Get(ctx context.Context, req *apiv1.GetRoleBindingRequest) (*apiv1.RoleBinding, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	return v.get(ctx, req.GetKey())
}

func (v *roleBindingService) List(ctx context.Context, req *apiv1.ListRoleBindingsRequest) (*apiv1.ListRoleBindingsResponse, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	return v.list(ctx, req.GetOptions())
}

func (v *roleBindingService) Update(ctx context.Context, req *apiv1.UpdateRoleBindingRequest) (*apiv1.RoleBinding, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	in := defaultRoleBinding(requestCopy(req.GetRoleBinding()))
	if errs := validation.ValidateRoleBinding(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindRoleBinding, in.GetMetadata().GetName(), errs)
	}
	return v.update(ctx, in, func(_, _ *apiv1.RoleBinding) error { return nil },
		func(n, in *apiv1.RoleBinding) bool { return replaceSpec(&n.Spec, in.Spec) })
}

func (v *roleBindingService) Delete(ctx context.Context, req *apiv1.DeleteRoleBindingRequest) (*apiv1.RoleBinding, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	return v.delete(ctx, req.GetKey(), req.GetOptions(), "by", IdentityFrom(ctx).String())
}

// clusterRoleBindingService serves ClusterRoleBindings: cluster-admins
// give subjects cluster-admin, or a role in every namespace.
type clusterRoleBindingService struct {
	apiv1.UnimplementedClusterRoleBindingsServer
	objects[*apiv1.ClusterRoleBinding, *apiv1.ListClusterRoleBindingsResponse, noEvent]
}

func newClusterRoleBindingService(s *Server) apiv1.ClusterRoleBindingsServer {
	return &clusterRoleBindingService{objects: objects[*apiv1.ClusterRoleBinding, *apiv1.ListClusterRoleBindingsResponse, noEvent]{
		st: s.stores.ClusterRoleBindings, log: s.log, kind: apiv1.KindClusterRoleBinding, noun: "cluster role binding", attr: "clusterrolebinding",
		listResponse: func(p store.Page[*apiv1.ClusterRoleBinding]) *apiv1.ListClusterRoleBindingsResponse {
			return &apiv1.ListClusterRoleBindingsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
	}}
}

func (v *clusterRoleBindingService) Create(ctx context.Context, req *apiv1.CreateClusterRoleBindingRequest) (*apiv1.ClusterRoleBinding, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	in := requestCopy(req.GetClusterRoleBinding())
	if errs := validation.ValidateClusterRoleBinding(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindClusterRoleBinding, in.GetMetadata().GetName(), errs)
	}
	in.Metadata = userMeta(in.Metadata)
	return v.create(ctx, in, "role", in.GetSpec().GetRole(), "by", IdentityFrom(ctx).String())
}

func (v *clusterRoleBindingService) Get(ctx context.Context, req *apiv1.GetClusterRoleBindingRequest) (*apiv1.ClusterRoleBinding, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	return getNamed(ctx, v.st, apiv1.KindClusterRoleBinding, req.GetName())
}

func (v *clusterRoleBindingService) List(ctx context.Context, req *apiv1.ListClusterRoleBindingsRequest) (*apiv1.ListClusterRoleBindingsResponse, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	return v.list(ctx, clusterList(req.GetOptions()))
}

func (v *clusterRoleBindingService) Update(ctx context.Context, req *apiv1.UpdateClusterRoleBindingRequest) (*apiv1.ClusterRoleBinding, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	in := requestCopy(req.GetClusterRoleBinding())
	if errs := validation.ValidateClusterRoleBinding(in); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindClusterRoleBinding, in.GetMetadata().GetName(), errs)
	}
	return updateNamed(ctx, v.st, apiv1.KindClusterRoleBinding, in, func(n, in *apiv1.ClusterRoleBinding) bool { return replaceSpec(&n.Spec, in.Spec) })
}

func (v *clusterRoleBindingService) Delete(ctx context.Context, req *apiv1.DeleteClusterRoleBindingRequest) (*apiv1.ClusterRoleBinding, error) {
	if v.st == nil {
		return nil, errNoIdentities
	}
	return deleteNamed(ctx, v.st, apiv1.KindClusterRoleBinding, req.GetName(), req.GetOptions())
}
