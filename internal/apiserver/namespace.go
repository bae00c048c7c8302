package apiserver

import apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

// PLACEHOLDER until the Namespace API lands on this branch (issue 36).
func newNamespaceService(*Server) apiv1.NamespacesServer {
	return apiv1.UnimplementedNamespacesServer{}
}
