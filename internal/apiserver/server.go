// Package apiserver implements the agent's gRPC API over the store: it
// defaults and validates what users send, keeps the fields the server owns
// (uid, status, timestamps) out of their reach, and streams watches.
package apiserver

import (
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Stores are the typed stores the API serves.
type Stores struct {
	VMs        store.Store[*apiv1.VirtualMachine]
	VMIs       store.Store[*apiv1.VirtualMachineInstance]
	Nodes      store.Store[*apiv1.Node]
	Migrations store.Store[*apiv1.VirtualMachineInstanceMigration]
}

// NewStores returns the etcd stores of every kind the API serves, all with
// opts (one key prefix; a leader's fence for controller writes).
func NewStores(c *clientv3.Client, opts store.Options) Stores {
	return Stores{
		VMs:        store.New(c, store.VirtualMachines, opts),
		VMIs:       store.New(c, store.VirtualMachineInstances, opts),
		Nodes:      store.New(c, store.Nodes, opts),
		Migrations: store.New(c, store.Migrations, opts),
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
}

// Server serves all API services.
type Server struct {
	stores   Stores
	opts     Options
	log      *slog.Logger
	consoles *consoleHub
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
	return &Server{stores: stores, opts: opts, log: opts.Logger, consoles: newConsoleHub()}
}

// Register adds every service to r.
func (s *Server) Register(r grpc.ServiceRegistrar) {
	apiv1.RegisterVirtualMachinesServer(r, &vmService{s: s})
	apiv1.RegisterVirtualMachineInstancesServer(r, &vmiService{s: s})
	apiv1.RegisterNodesServer(r, &nodeService{s: s})
	apiv1.RegisterConsolesServer(r, &consoleService{s: s})
}
