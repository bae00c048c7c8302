// Package apiserver implements the agent's gRPC API over the store: it
// defaults and validates what users send, keeps the fields the server owns
// (uid, status, timestamps) out of their reach, and streams watches.
package apiserver

import (
	"context"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"google.golang.org/grpc"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Stores are the typed stores the API serves.
type Stores struct {
	VMs        store.Store[*apiv1.VirtualMachine]
	VMIs       store.Store[*apiv1.VirtualMachineInstance]
	Nodes      store.Store[*apiv1.Node]
	Migrations store.Store[*apiv1.VirtualMachineInstanceMigration]
	Images     store.Store[*apiv1.Image]
	// StorageClasses (storage.proto); nil serves none (tests).
	StorageClasses store.Store[*apiv1.StorageClass]
	// The replica kinds (replicas.proto).
	ReplicaSets store.Store[*apiv1.VirtualMachineInstanceReplicaSet]
	Pools       store.Store[*apiv1.VirtualMachinePool]
	// The snapshot kinds (snapshots.proto).
	Snapshots        store.Store[*apiv1.VirtualMachineSnapshot]
	SnapshotContents store.Store[*apiv1.VirtualMachineSnapshotContent]
	Restores         store.Store[*apiv1.VirtualMachineRestore]
	Clones           store.Store[*apiv1.VirtualMachineClone]
	// VM exports (exports.proto); nil serves none (tests).
	Exports store.Store[*apiv1.VirtualMachineExport]
	// The backup kinds (backups.proto); nil serves none (tests).
	BackupTargets   store.Store[*apiv1.BackupTarget]
	Backups         store.Store[*apiv1.VirtualMachineBackup]
	BackupSchedules store.Store[*apiv1.VirtualMachineBackupSchedule]
	BackupRestores  store.Store[*apiv1.VirtualMachineBackupRestore]
	// Adoptions (adoption.proto); nil serves none (tests).
	Adoptions store.Store[*apiv1.VirtualMachineAdoption]
	// Credentials of nodes; nil serves no node certificates (tests).
	BootstrapTokens store.Store[*apiv1.BootstrapToken]
	NodeCredentials store.Store[*apiv1.NodeCredential]
	// The tenancy kinds (tenancy.proto); nil serves none (tests).
	Namespaces          store.Store[*apiv1.Namespace]
	Users               store.Store[*apiv1.User]
	ServiceAccounts     store.Store[*apiv1.ServiceAccount]
	Credentials         store.Store[*apiv1.Credential]
	RoleBindings        store.Store[*apiv1.RoleBinding]
	ClusterRoleBindings store.Store[*apiv1.ClusterRoleBinding]
}

// NewStores returns the etcd stores of every kind the API serves, all with
// opts (one key prefix; a leader's fence for controller writes).
func NewStores(c *clientv3.Client, opts store.Options) Stores {
	// Every writer of the server's objects, the API and the controllers,
	// keeps namespaces' usage and quotas (store.Options.Accounting).
	opts.Accounting = true
	return Stores{
		VMs:              store.New(c, store.VirtualMachines, opts),
		VMIs:             store.New(c, store.VirtualMachineInstances, opts),
		Nodes:            store.New(c, store.Nodes, opts),
		Migrations:       store.New(c, store.Migrations, opts),
		Images:           store.New(c, store.Images, opts),
		StorageClasses:   store.New(c, store.StorageClasses, opts),
		ReplicaSets:      store.New(c, store.ReplicaSets, opts),
		Pools:            store.New(c, store.Pools, opts),
		Snapshots:        store.New(c, store.Snapshots, opts),
		SnapshotContents: store.New(c, store.SnapshotContents, opts),
		Restores:         store.New(c, store.Restores, opts),
		Clones:           store.New(c, store.Clones, opts),
		Exports:          store.New(c, store.Exports, opts),
		BackupTargets:    store.New(c, store.BackupTargets, opts),
		Backups:          store.New(c, store.Backups, opts),
		BackupSchedules:  store.New(c, store.BackupSchedules, opts),
		BackupRestores:   store.New(c, store.BackupRestores, opts),
		Adoptions:        store.New(c, store.Adoptions, opts),
		// Credentials are the API's own writes, never a leader's: no fence.
		BootstrapTokens: store.New(c, store.BootstrapTokens, store.Options{Prefix: opts.Prefix}),
		NodeCredentials: store.New(c, store.NodeCredentials, store.Options{Prefix: opts.Prefix}),
		// Who may do what is the API's own, never a leader's: no fence.
		Users:               store.New(c, store.Users, store.Options{Prefix: opts.Prefix}),
		ServiceAccounts:     store.New(c, store.ServiceAccounts, store.Options{Prefix: opts.Prefix}),
		Credentials:         store.New(c, store.Credentials, store.Options{Prefix: opts.Prefix}),
		RoleBindings:        store.New(c, store.RoleBindings, store.Options{Prefix: opts.Prefix}),
		ClusterRoleBindings: store.New(c, store.ClusterRoleBindings, store.Options{Prefix: opts.Prefix}),
		Namespaces:          store.New(c, store.Namespaces, opts),
	}
}

// Options tune the API.
type Options struct {
	// Validation's HostPolicy nil is validation.DefaultHostPolicy().
	Validation validation.Options
	// Node fencing lease handed to node agents, and how often they beat.
	NodeLease         time.Duration
	HeartbeatInterval time.Duration
	Clock             func() time.Time
	Logger            *slog.Logger

	// CA signs node certificates (Bootstrap.Join and Renew); nil issues
	// none.
	CA *pki.CA
	// NodeCertValidity is how long a node certificate is valid;
	// 0 means pki.DefaultNodeCertValidity.
	NodeCertValidity time.Duration
	// Limits bound each caller (limits.go).
	Limits Limits
	// Metrics, when set, count calls and refusals.
	Metrics *Metrics
	// DefaultEvictionStrategy applies to instances that set none
	// (--default-eviction-strategy); empty is apiv1.DefaultEvictionStrategy.
	DefaultEvictionStrategy string
	// MigrationDestinations is the cluster's migration policy: Register
	// refuses a migration address outside its networks (node.go).
	MigrationDestinations migrationdest.Policy
	// ImagePolicy is the policy of image downloads: Images get its
	// default max_size and may not exceed its cap, and every heartbeat
	// answer carries it to the node. Zero bounds take the defaults.
	ImagePolicy imagepolicy.Policy
	// UploadDir holds the images sent by image upload (imageupload.go);
	// empty takes none.
	UploadDir string
	// BackupTargets reads what a backup target holds (ListManifests);
	// nil answers Unimplemented.
	BackupTargets TargetReader
	// Audit records writes and console, export and migration requests
	// (audit.go) and serves Audit.Read; nil keeps no audit trail.
	Audit AuditLog
	// AuditNodeReports records the nodes' routine reports too
	// (auditNodeReport).
	AuditNodeReports bool
	// ServerName names this server in audit records (its node name).
	ServerName string
}

// Server serves all API services.
type Server struct {
	stores   Stores
	opts     Options
	log      *slog.Logger
	consoles *consoleHub
	creds    *nodeCreds
	// users are the credentials of users and service accounts, roles
	// their role bindings (usercreds.go, roles.go).
	users  *userCreds
	roles  *roleCache
	limits *limiter
	// oversize carries the requests the codec refused to their
	// interceptor (reqlimits.go).
	oversize *oversized
	// registerMu makes Register's check that no other node holds a
	// migration address and its write one step on this server.
	registerMu sync.Mutex
}

// New returns a server over stores.
func New(stores Stores, opts Options) *Server {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.NodeLease == 0 {
		opts.NodeLease = 40 * time.Second
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = 10 * time.Second
	}
	if opts.Validation.HostPolicy == nil {
		// The server always checks one: the defaults, unless the
		// operator set another.
		opts.Validation.HostPolicy = validation.DefaultHostPolicy()
	}
	opts.ImagePolicy.Complete()
	s := &Server{stores: stores, opts: opts, log: opts.Logger, consoles: newConsoleHub(), limits: newLimiter(opts.Limits, opts.Metrics), oversize: &oversized{}}
	var creds informer.Watcher[*apiv1.NodeCredential]
	if stores.NodeCredentials != nil {
		creds = stores.NodeCredentials
	}
	s.creds = newCredentials(creds, opts.Clock, opts.Logger)
	s.users = newUserCreds(stores, opts.Clock, opts.Logger)
	s.roles = newRoleCache(stores.RoleBindings, stores.ClusterRoleBindings, opts.Logger, func(subjects []string) {
		s.users.recheckSubjects(subjects, s.recheck)
	})
	return s
}

// Run keeps the server's caches (the node credentials, users' credentials
// and role bindings) until ctx ends.
func (s *Server) Run(ctx context.Context) {
	go s.users.run(ctx)
	go s.roles.run(ctx)
	s.creds.run(ctx)
}

// Register adds every service to r: one line per service of
// apiv1.Services(). A new kind takes, in this package, its store in
// Stores, its service's file, its line here and its methods in
// authz_table.go's methodRules (and in quotaGuarded when its writes add
// VMs).
// TestEveryServiceIsRegistered fails while a service has no line,
// TestEveryMethodIsServed while one of its methods is left to the
// Unimplemented fallback.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	apiv1.RegisterVirtualMachinesServer(r, newVMService(s))
	apiv1.RegisterVirtualMachineInstancesServer(r, newVMIService(s))
	apiv1.RegisterNodesServer(r, newNodeService(s))
	apiv1.RegisterConsolesServer(r, newConsoleService(s))
	apiv1.RegisterImagesServer(r, newImageService(s))
	apiv1.RegisterStorageClassesServer(r, newStorageClassService(s))
	apiv1.RegisterMigrationsServer(r, newMigrationService(s))
	apiv1.RegisterReplicaSetsServer(r, newReplicaSetService(s))
	apiv1.RegisterPoolsServer(r, newPoolService(s))
	apiv1.RegisterSnapshotsServer(r, newSnapshotService(s))
	apiv1.RegisterSnapshotContentsServer(r, newSnapshotContentService(s))
	apiv1.RegisterRestoresServer(r, newRestoreService(s))
	apiv1.RegisterClonesServer(r, newCloneService(s))
	apiv1.RegisterExportsServer(r, newExportService(s))
	apiv1.RegisterImageUploadsServer(r, newImageUploadService(s))
	apiv1.RegisterBackupTargetsServer(r, newBackupTargetService(s))
	apiv1.RegisterBackupsServer(r, newBackupService(s))
	apiv1.RegisterBackupSchedulesServer(r, newBackupScheduleService(s))
	apiv1.RegisterBackupRestoresServer(r, newBackupRestoreService(s))
	apiv1.RegisterAdoptionsServer(r, newAdoptionService(s))
	apiv1.RegisterBootstrapServer(r, newBootstrapService(s))
	apiv1.RegisterNamespacesServer(r, newNamespaceService(s))
	apiv1.RegisterUsersServer(r, newUserService(s))
	apiv1.RegisterServiceAccountsServer(r, newServiceAccountService(s))
	apiv1.RegisterCredentialsServer(r, newCredentialService(s))
	apiv1.RegisterRoleBindingsServer(r, newRoleBindingService(s))
	apiv1.RegisterClusterRoleBindingsServer(r, newClusterRoleBindingService(s))
	apiv1.RegisterAuthServer(r, newAuthService(s))
	apiv1.RegisterAuditServer(r, newAuditService(s))
}
