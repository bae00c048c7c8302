package apiserver

import apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

// PLACEHOLDERS until the identity APIs land on this branch (issue 36).
func newUserService(*Server) apiv1.UsersServer { return apiv1.UnimplementedUsersServer{} }
func newServiceAccountService(*Server) apiv1.ServiceAccountsServer {
	return apiv1.UnimplementedServiceAccountsServer{}
}
func newCredentialService(*Server) apiv1.CredentialsServer {
	return apiv1.UnimplementedCredentialsServer{}
}
func newRoleBindingService(*Server) apiv1.RoleBindingsServer {
	return apiv1.UnimplementedRoleBindingsServer{}
}
func newClusterRoleBindingService(*Server) apiv1.ClusterRoleBindingsServer {
	return apiv1.UnimplementedClusterRoleBindingsServer{}
}
func newAuthService(*Server) apiv1.AuthServer { return apiv1.UnimplementedAuthServer{} }
