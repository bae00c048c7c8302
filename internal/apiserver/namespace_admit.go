package apiserver

import (
	"context"
	"errors"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// namespaceAllowed is namespace ns's allowed host resources; nil (no
// narrowing of the host policy) when it has none or no object yet, or
// when the server serves no namespaces (tests).
func (s *Server) namespaceAllowed(ctx context.Context, ns string) (*apiv1.NamespaceAllowed, error) {
	if s.stores.Namespaces == nil {
		return nil, nil
	}
	obj, err := s.stores.Namespaces.Get(ctx, "", ns)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, toStatus(err)
	}
	return obj.GetSpec().GetAllowed(), nil
}

// checkNamespaceAllowed refuses the host resources of spec (an instance
// spec at path of object kind ns/name: a VM's template, a pool's or a
// replica set's) that namespace ns does not allow, InvalidArgument naming
// each field (validation.CheckNamespaceAllowed). The server's host
// policy is validation's, checked before.
func (s *Server) checkNamespaceAllowed(ctx context.Context, kind, ns, name string, path *field.Path, spec *apiv1.VirtualMachineInstanceSpec) error {
	allowed, err := s.namespaceAllowed(ctx, ns)
	if err != nil || allowed == nil {
		return err
	}
	return validation.ToStatusError(kind, name, validation.CheckNamespaceAllowed(ns, allowed, spec, path))
}
