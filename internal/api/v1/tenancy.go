package apiv1

// Names of the tenancy kinds (tenancy.proto), their roles and the label
// that says which namespace owns a cluster-wide image. One definition
// each; docs/security.md explains them.
const (
	KindNamespace          = "Namespace"
	KindUser               = "User"
	KindServiceAccount     = "ServiceAccount"
	KindCredential         = "Credential"
	KindRoleBinding        = "RoleBinding"
	KindClusterRoleBinding = "ClusterRoleBinding"

	// LabelOwnerNamespace on an Image names the namespace whose editors
	// made it: they may change and delete it, and it counts against the
	// namespace's images quota. Cluster-admins' images have none.
	LabelOwnerNamespace = "virtplane.io/namespace"
)

// Roles a binding gives. A namespace's admin may do what its edit may,
// and edit what view may; cluster-admin may do everything.
const (
	RoleClusterAdmin = "cluster-admin"
	RoleAdmin        = "admin"
	RoleEdit         = "edit"
	RoleView         = "view"
)

// Subject kinds.
const (
	SubjectUser           = "User"
	SubjectServiceAccount = "ServiceAccount"
)

// Credential types.
const (
	CredentialToken       = "Token"
	CredentialCertificate = "Certificate"
)

// TokenPrefix starts every user or service-account token
// ("vpt_<credential name>.<secret>"), which tells it from the bootstrap
// admin token and node bootstrap tokens at a glance (and to secret
// scanners).
const TokenPrefix = "vpt_"
