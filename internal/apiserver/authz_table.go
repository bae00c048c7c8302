package apiserver

import apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

// The authorization table (docs/security.md, "Roles"): one entry per
// method of apiv1.Services(), saying which role a user or service account
// needs and where. Admins (the bootstrap token, the unix socket) and
// users bound to cluster-admin by a ClusterRoleBinding may call every
// method; nodes call only what nodeRules (authz.go) lets them, as before;
// anonymous callers only Bootstrap.Join. A test keeps every method in
// this table, so a new method is never open by omission
// (TestEveryMethodHasAnAuthorizationRule), and the role matrix test
// (authz_matrix_test.go) calls every method as every kind of caller and
// checks the answer against the entry.
//
// Roles are ordered view < edit < admin < cluster-admin. The decisions:
//   - A namespaced kind's reads (Get, List, Watch) need view in the
//     request's namespace; its writes, and consoles, exports, migrations,
//     evictions (they act on a VM), need edit. A namespace's service
//     accounts and role bindings are read by its viewers and written by
//     its admins only: they say who may do what there.
//   - Status writes (UpdateStatus) are the controllers' and the nodes':
//     cluster-admins only, as adoptions are (an adoption takes over a
//     host's domain).
//   - A List or Watch of all namespaces (namespace "") needs the role in
//     every namespace, from a ClusterRoleBinding; a Watch by name must
//     name its namespace likewise.
//   - Cluster-scoped infrastructure that VM specs name (images, storage
//     classes, nodes, backup targets) is read by anyone who holds a role
//     anywhere; it is written, and nodes administered, by cluster-admins.
//   - Images are written by cluster-admins, or by the editors of the
//     namespace the image's label virtplane.io/namespace names (taken
//     from the request on Create, where non-cluster-admins must set it,
//     and from the stored image on Update and Delete; only cluster-admins
//     change it). Uploads follow the stored image; an upload of a new
//     image makes one without the label: cluster-admins only.
//   - Users' credentials are issued and managed by cluster-admins, a
//     service account's also by its namespace's admins.
//   - Namespaces are read by those with a role in them; List answers the
//     namespaces the caller has a role in.
//   - Auth.WhoAmI and CanI are for every authenticated caller.

// scope says where a rule's role must be held.
type scope int

const (
	// scopeNamespace: in the namespace the request acts in (target).
	scopeNamespace scope = iota
	// scopeCluster: everywhere, from a ClusterRoleBinding; with role
	// cluster-admin, cluster-admins only.
	scopeCluster
	// scopeBound: anywhere: any role in any namespace, or a cluster role.
	scopeBound
	// scopeSelf: any authenticated caller.
	scopeSelf
	// scopeJoin: any caller: the request carries the credential
	// (Bootstrap.Join).
	scopeJoin
)

// methodRule is one entry of the table.
type methodRule struct {
	role  role
	scope scope
	// target, for scopeNamespace, is the namespace a request acts in
	// (requestTarget when nil).
	target targetFunc
	// after, when set, trims the response for a caller who is not a
	// cluster-admin (Namespaces.List: those it has a role in).
	after func(g grants, resp any) any
}

func view() methodRule        { return methodRule{role: roleView} }
func edit() methodRule        { return methodRule{role: roleEdit} }
func nsAdmin() methodRule     { return methodRule{role: roleAdmin} }
func bound() methodRule       { return methodRule{role: roleView, scope: scopeBound} }
func cluster() methodRule     { return methodRule{role: roleClusterAdmin, scope: scopeCluster} }
func clusterView() methodRule { return methodRule{role: roleView, scope: scopeCluster} }

func (r methodRule) by(t targetFunc) methodRule { r.target = t; return r }

var methodRules = map[string]methodRule{
	// Virtual machines and their verbs.
	apiv1.VirtualMachines_Create_FullMethodName:       edit(),
	apiv1.VirtualMachines_Get_FullMethodName:          view(),
	apiv1.VirtualMachines_List_FullMethodName:         view(),
	apiv1.VirtualMachines_Update_FullMethodName:       edit(),
	apiv1.VirtualMachines_Delete_FullMethodName:       edit(),
	apiv1.VirtualMachines_Watch_FullMethodName:        view(),
	apiv1.VirtualMachines_Start_FullMethodName:        edit(),
	apiv1.VirtualMachines_Stop_FullMethodName:         edit(),
	apiv1.VirtualMachines_Restart_FullMethodName:      edit(),
	apiv1.VirtualMachines_Pause_FullMethodName:        edit(),
	apiv1.VirtualMachines_Unpause_FullMethodName:      edit(),
	apiv1.VirtualMachines_Migrate_FullMethodName:      edit(),
	apiv1.VirtualMachines_AddVolume_FullMethodName:    edit(),
	apiv1.VirtualMachines_RemoveVolume_FullMethodName: edit(),
	// Instances are the VM controller's; users read and evict them.
	apiv1.VirtualMachineInstances_Get_FullMethodName:          view(),
	apiv1.VirtualMachineInstances_List_FullMethodName:         view(),
	apiv1.VirtualMachineInstances_Watch_FullMethodName:        view(),
	apiv1.VirtualMachineInstances_UpdateStatus_FullMethodName: cluster(),
	apiv1.VirtualMachineInstances_Evict_FullMethodName:        edit(),
	apiv1.Migrations_Create_FullMethodName:                    edit(),
	apiv1.Migrations_Get_FullMethodName:                       view(),
	apiv1.Migrations_List_FullMethodName:                      view(),
	apiv1.Migrations_Delete_FullMethodName:                    edit(),
	apiv1.Migrations_Watch_FullMethodName:                     view(),
	// A console reads and types into a guest: edit.
	apiv1.Consoles_Attach_FullMethodName: edit(),
	// The node side of consoles: nodes (nodeRules) and cluster-admins.
	apiv1.Consoles_Sessions_FullMethodName: cluster(),
	apiv1.Consoles_Serve_FullMethodName:    cluster(),
	// Replica sets and pools.
	apiv1.ReplicaSets_Create_FullMethodName: edit(),
	apiv1.ReplicaSets_Get_FullMethodName:    view(),
	apiv1.ReplicaSets_List_FullMethodName:   view(),
	apiv1.ReplicaSets_Update_FullMethodName: edit(),
	apiv1.ReplicaSets_Delete_FullMethodName: edit(),
	apiv1.ReplicaSets_Watch_FullMethodName:  view(),
	apiv1.ReplicaSets_Scale_FullMethodName:  edit(),
	apiv1.Pools_Create_FullMethodName:       edit(),
	apiv1.Pools_Get_FullMethodName:          view(),
	apiv1.Pools_List_FullMethodName:         view(),
	apiv1.Pools_Update_FullMethodName:       edit(),
	apiv1.Pools_Delete_FullMethodName:       edit(),
	apiv1.Pools_Watch_FullMethodName:        view(),
	apiv1.Pools_Scale_FullMethodName:        edit(),
	// Snapshots, their contents, restores and clones.
	apiv1.Snapshots_Create_FullMethodName:              edit(),
	apiv1.Snapshots_Get_FullMethodName:                 view(),
	apiv1.Snapshots_List_FullMethodName:                view(),
	apiv1.Snapshots_UpdateStatus_FullMethodName:        cluster(),
	apiv1.Snapshots_Delete_FullMethodName:              edit(),
	apiv1.Snapshots_Watch_FullMethodName:               view(),
	apiv1.SnapshotContents_Get_FullMethodName:          view(),
	apiv1.SnapshotContents_List_FullMethodName:         view(),
	apiv1.SnapshotContents_UpdateStatus_FullMethodName: cluster(),
	apiv1.SnapshotContents_Delete_FullMethodName:       edit(),
	apiv1.SnapshotContents_Watch_FullMethodName:        view(),
	apiv1.Restores_Create_FullMethodName:               edit(),
	apiv1.Restores_Get_FullMethodName:                  view(),
	apiv1.Restores_List_FullMethodName:                 view(),
	apiv1.Restores_UpdateStatus_FullMethodName:         cluster(),
	apiv1.Restores_Delete_FullMethodName:               edit(),
	apiv1.Restores_Watch_FullMethodName:                view(),
	apiv1.Clones_Create_FullMethodName:                 edit(),
	apiv1.Clones_Get_FullMethodName:                    view(),
	apiv1.Clones_List_FullMethodName:                   view(),
	apiv1.Clones_UpdateStatus_FullMethodName:           cluster(),
	apiv1.Clones_Delete_FullMethodName:                 edit(),
	apiv1.Clones_Watch_FullMethodName:                  view(),
	// Exports hand a VM's disks out: edit.
	apiv1.Exports_Create_FullMethodName:       edit(),
	apiv1.Exports_Get_FullMethodName:          view(),
	apiv1.Exports_List_FullMethodName:         view(),
	apiv1.Exports_UpdateStatus_FullMethodName: cluster(),
	apiv1.Exports_Delete_FullMethodName:       edit(),
	apiv1.Exports_Watch_FullMethodName:        view(),
	// Backups, schedules and backup restores are namespaced; targets are
	// the cluster-admins' (they hold keys), read by VM authors.
	apiv1.BackupTargets_Create_FullMethodName:        cluster(),
	apiv1.BackupTargets_Get_FullMethodName:           bound(),
	apiv1.BackupTargets_List_FullMethodName:          bound(),
	apiv1.BackupTargets_Update_FullMethodName:        cluster(),
	apiv1.BackupTargets_Delete_FullMethodName:        cluster(),
	apiv1.BackupTargets_Watch_FullMethodName:         bound(),
	apiv1.BackupTargets_Connect_FullMethodName:       cluster(),
	apiv1.BackupTargets_ListManifests_FullMethodName: cluster(),
	apiv1.Backups_Create_FullMethodName:              edit(),
	apiv1.Backups_Get_FullMethodName:                 view(),
	apiv1.Backups_List_FullMethodName:                view(),
	apiv1.Backups_UpdateStatus_FullMethodName:        cluster(),
	apiv1.Backups_Delete_FullMethodName:              edit(),
	apiv1.Backups_Watch_FullMethodName:               view(),
	apiv1.BackupSchedules_Create_FullMethodName:      edit(),
	apiv1.BackupSchedules_Get_FullMethodName:         view(),
	apiv1.BackupSchedules_List_FullMethodName:        view(),
	apiv1.BackupSchedules_Update_FullMethodName:      edit(),
	apiv1.BackupSchedules_Delete_FullMethodName:      edit(),
	apiv1.BackupSchedules_Watch_FullMethodName:       view(),
	apiv1.BackupRestores_Create_FullMethodName:       edit(),
	apiv1.BackupRestores_Get_FullMethodName:          view(),
	apiv1.BackupRestores_List_FullMethodName:         view(),
	apiv1.BackupRestores_UpdateStatus_FullMethodName: cluster(),
	apiv1.BackupRestores_Delete_FullMethodName:       edit(),
	apiv1.BackupRestores_Watch_FullMethodName:        view(),
	// Adopting takes over a host's libvirt domain: cluster-admins.
	apiv1.Adoptions_Create_FullMethodName:       cluster(),
	apiv1.Adoptions_Get_FullMethodName:          cluster(),
	apiv1.Adoptions_List_FullMethodName:         cluster(),
	apiv1.Adoptions_UpdateStatus_FullMethodName: cluster(),
	apiv1.Adoptions_Delete_FullMethodName:       cluster(),
	apiv1.Adoptions_Watch_FullMethodName:        cluster(),
	// Nodes: read by VM authors (placement); the rest is the
	// cluster-admins' and the nodes' own.
	apiv1.Nodes_Get_FullMethodName:       bound(),
	apiv1.Nodes_List_FullMethodName:      bound(),
	apiv1.Nodes_Watch_FullMethodName:     bound(),
	apiv1.Nodes_Register_FullMethodName:  cluster(),
	apiv1.Nodes_Heartbeat_FullMethodName: cluster(),
	apiv1.Nodes_Fence_FullMethodName:     cluster(),
	apiv1.Nodes_Revoke_FullMethodName:    cluster(),
	apiv1.Nodes_Delete_FullMethodName:    cluster(),
	apiv1.Nodes_Cordon_FullMethodName:    cluster(),
	apiv1.Nodes_Uncordon_FullMethodName:  cluster(),
	apiv1.Nodes_Drain_FullMethodName:     cluster(),
	apiv1.Nodes_Label_FullMethodName:     cluster(),
	// Images: read by everyone with a role; written by cluster-admins and
	// the editors of the namespace that owns the image.
	apiv1.Images_Create_FullMethodName:           edit().by(imageCreateOwner),
	apiv1.Images_Get_FullMethodName:              bound(),
	apiv1.Images_List_FullMethodName:             bound(),
	apiv1.Images_Update_FullMethodName:           edit().by(imageUpdateOwner),
	apiv1.Images_Delete_FullMethodName:           edit().by(storedImageOwner),
	apiv1.Images_Watch_FullMethodName:            bound(),
	apiv1.Images_UpdateNodeStatus_FullMethodName: cluster(),
	apiv1.ImageUploads_Begin_FullMethodName:      edit().by(storedImageOwner),
	apiv1.ImageUploads_Write_FullMethodName:      edit().by(storedImageOwner),
	apiv1.ImageUploads_Commit_FullMethodName:     edit().by(storedImageOwner),
	apiv1.ImageUploads_Download_FullMethodName:   bound(),
	// Storage classes: read by VM authors; their keys leave only through
	// Connect, to nodes (and cluster-admins, who wrote them).
	apiv1.StorageClasses_Create_FullMethodName:  cluster(),
	apiv1.StorageClasses_Get_FullMethodName:     bound(),
	apiv1.StorageClasses_List_FullMethodName:    bound(),
	apiv1.StorageClasses_Update_FullMethodName:  cluster(),
	apiv1.StorageClasses_Delete_FullMethodName:  cluster(),
	apiv1.StorageClasses_Watch_FullMethodName:   bound(),
	apiv1.StorageClasses_Connect_FullMethodName: cluster(),
	// Joining the cluster: the bootstrap token in the request
	// authenticates; making one is the cluster-admins'.
	apiv1.Bootstrap_CreateToken_FullMethodName: cluster(),
	apiv1.Bootstrap_Join_FullMethodName:        {scope: scopeJoin},
	apiv1.Bootstrap_Renew_FullMethodName:       cluster(),
	// Namespaces.
	apiv1.Namespaces_Create_FullMethodName: cluster(),
	apiv1.Namespaces_Get_FullMethodName:    view().by(namespaceByName),
	apiv1.Namespaces_List_FullMethodName:   methodRule{role: roleView, scope: scopeBound, after: namespacesHeld},
	apiv1.Namespaces_Update_FullMethodName: cluster(),
	apiv1.Namespaces_Delete_FullMethodName: cluster(),
	apiv1.Namespaces_Watch_FullMethodName:  clusterView(),
	// Identities and bindings.
	apiv1.Users_Create_FullMethodName:                 cluster(),
	apiv1.Users_Get_FullMethodName:                    cluster(),
	apiv1.Users_List_FullMethodName:                   cluster(),
	apiv1.Users_Update_FullMethodName:                 cluster(),
	apiv1.Users_Delete_FullMethodName:                 cluster(),
	apiv1.ServiceAccounts_Create_FullMethodName:       nsAdmin(),
	apiv1.ServiceAccounts_Get_FullMethodName:          view(),
	apiv1.ServiceAccounts_List_FullMethodName:         view(),
	apiv1.ServiceAccounts_Update_FullMethodName:       nsAdmin(),
	apiv1.ServiceAccounts_Delete_FullMethodName:       nsAdmin(),
	apiv1.Credentials_IssueToken_FullMethodName:       nsAdmin().by(requestSubject),
	apiv1.Credentials_IssueCertificate_FullMethodName: nsAdmin().by(requestSubject),
	apiv1.Credentials_Get_FullMethodName:              nsAdmin().by(storedCredentialSubject),
	apiv1.Credentials_List_FullMethodName:             nsAdmin().by(requestSubject),
	apiv1.Credentials_Revoke_FullMethodName:           nsAdmin().by(storedCredentialSubject),
	apiv1.Credentials_Delete_FullMethodName:           nsAdmin().by(storedCredentialSubject),
	apiv1.RoleBindings_Create_FullMethodName:          nsAdmin(),
	apiv1.RoleBindings_Get_FullMethodName:             view(),
	apiv1.RoleBindings_List_FullMethodName:            view(),
	apiv1.RoleBindings_Update_FullMethodName:          nsAdmin(),
	apiv1.RoleBindings_Delete_FullMethodName:          nsAdmin(),
	apiv1.ClusterRoleBindings_Create_FullMethodName:   cluster(),
	apiv1.ClusterRoleBindings_Get_FullMethodName:      cluster(),
	apiv1.ClusterRoleBindings_List_FullMethodName:     cluster(),
	apiv1.ClusterRoleBindings_Update_FullMethodName:   cluster(),
	apiv1.ClusterRoleBindings_Delete_FullMethodName:   cluster(),
	apiv1.Auth_WhoAmI_FullMethodName:                  {scope: scopeSelf},
	apiv1.Auth_CanI_FullMethodName:                    {scope: scopeSelf},
	// The audit log is the cluster-admins'.
	apiv1.Audit_Read_FullMethodName: cluster(),
}
