// Package apiserver implements the agent's gRPC API over the store: it
// defaults and validates what users send, keeps the fields the server owns
// (uid, status, timestamps) out of their reach, and streams watches.
package apiserver

import (
	"context"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
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
	// The replica kinds (replicas.proto).
	ReplicaSets store.Store[*apiv1.VirtualMachineInstanceReplicaSet]
	Pools       store.Store[*apiv1.VirtualMachinePool]
	// The snapshot kinds (snapshots.proto).
	Snapshots        store.Store[*apiv1.VirtualMachineSnapshot]
	SnapshotContents store.Store[*apiv1.VirtualMachineSnapshotContent]
	Restores         store.Store[*apiv1.VirtualMachineRestore]
	Clones           store.Store[*apiv1.VirtualMachineClone]
	// Credentials of nodes; nil serves no node certificates (tests).
	BootstrapTokens store.Store[*apiv1.BootstrapToken]
	NodeCredentials store.Store[*apiv1.NodeCredential]
}

// NewStores returns the etcd stores of every kind the API serves, all with
// opts (one key prefix; a leader's fence for controller writes).
func NewStores(c *clientv3.Client, opts store.Options) Stores {
	return Stores{
		VMs:              store.New(c, store.VirtualMachines, opts),
		VMIs:             store.New(c, store.VirtualMachineInstances, opts),
		Nodes:            store.New(c, store.Nodes, opts),
		Migrations:       store.New(c, store.Migrations, opts),
		Images:           store.New(c, store.Images, opts),
		ReplicaSets:      store.New(c, store.ReplicaSets, opts),
		Pools:            store.New(c, store.Pools, opts),
		Snapshots:        store.New(c, store.Snapshots, opts),
		SnapshotContents: store.New(c, store.SnapshotContents, opts),
		Restores:         store.New(c, store.Restores, opts),
		Clones:           store.New(c, store.Clones, opts),
		// Credentials are the API's own writes, never a leader's: no fence.
		BootstrapTokens: store.New(c, store.BootstrapTokens, store.Options{Prefix: opts.Prefix}),
		NodeCredentials: store.New(c, store.NodeCredentials, store.Options{Prefix: opts.Prefix}),
	}
}

// Options tune the API.
type Options struct {
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
}

// Server serves all API services.
type Server struct {
	stores   Stores
	opts     Options
	log      *slog.Logger
	consoles *consoleHub
	creds    *nodeCreds
	limits   *limiter
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
	s := &Server{stores: stores, opts: opts, log: opts.Logger, consoles: newConsoleHub(), limits: newLimiter(opts.Limits, opts.Metrics)}
	var creds informer.Watcher[*apiv1.NodeCredential]
	if stores.NodeCredentials != nil {
		creds = stores.NodeCredentials
	}
	s.creds = newCredentials(creds, opts.Clock, opts.Logger)
	return s
}

// Run keeps the server's caches (the node credentials) until ctx ends.
func (s *Server) Run(ctx context.Context) { s.creds.run(ctx) }

// services are the API's gRPC services, one entry each: the service its
// file builds and how it is registered. A new kind takes, in this
// package, its store in Stores, its service's file, its entry here and
// its methods in authz.go's tables (and in quotaGuarded when its writes
// add VMs). TestEveryServiceIsRegistered fails while a service of
// apiv1.Services() has no entry, TestEveryMethodIsServed while one of its
// methods is left to the Unimplemented fallback.
var services = []registration{
	serve(apiv1.RegisterVirtualMachinesServer, newVMService),
	serve(apiv1.RegisterVirtualMachineInstancesServer, newVMIService),
	serve(apiv1.RegisterNodesServer, newNodeService),
	serve(apiv1.RegisterConsolesServer, newConsoleService),
	serve(apiv1.RegisterImagesServer, newImageService),
	serve(apiv1.RegisterMigrationsServer, newMigrationService),
	serve(apiv1.RegisterReplicaSetsServer, newReplicaSetService),
	serve(apiv1.RegisterPoolsServer, newPoolService),
	serve(apiv1.RegisterSnapshotsServer, newSnapshotService),
	serve(apiv1.RegisterSnapshotContentsServer, newSnapshotContentService),
	serve(apiv1.RegisterRestoresServer, newRestoreService),
	serve(apiv1.RegisterClonesServer, newCloneService),
	serve(apiv1.RegisterBootstrapServer, newBootstrapService),
}

// registration registers one service of s with r.
type registration func(r grpc.ServiceRegistrar, s *Server)

// serve is the registration of the service newService builds, by its
// generated register function. The services' constructors return their
// gRPC interface, so that the two agree on S.
func serve[S any](register func(grpc.ServiceRegistrar, S), newService func(*Server) S) registration {
	return func(r grpc.ServiceRegistrar, s *Server) { register(r, newService(s)) }
}

// Register adds every service to r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	for _, register := range services {
		register(r, s)
	}
}
