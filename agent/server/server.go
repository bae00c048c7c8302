// Package server is the agent's composition root: it opens the store
// (embedded etcd by default, an external cluster when endpoints are given),
// serves the gRPC API on a unix socket and optionally on TLS/TCP, exposes
// metrics, and runs the controllers while it holds the leader election.
package server

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/apiserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/audit"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/target"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	migctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/migration"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/leader"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Roles an agent can run.
const (
	RoleAll    = "all"
	RoleServer = "server"
	RoleNode   = "node"
)

// Options configure an agent; zero values get the documented defaults.
type Options struct {
	Role    string
	DataDir string // default /var/lib/virtplane
	Socket  string // default /run/virtplane/agent.sock
	// Listen is the optional TLS/TCP listener ("0.0.0.0:7443"); it requires
	// a bearer token on every call.
	Listen  string
	TLSSANs []string
	// Overrides of the generated PKI files in DataDir/pki.
	TLSCertFile, TLSKeyFile, TokenFile string

	EtcdEndpoints                         []string // empty: embedded etcd
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	EtcdListenClient                      []string // extra listeners of the embedded etcd
	// EtcdName names the embedded member; EtcdPeerListen, when set, makes
	// it one of a cluster of embedded members (EtcdInitialCluster, and
	// EtcdInitialClusterState "existing" after `store member add`).
	EtcdName                string
	EtcdPeerListen          []string
	EtcdInitialCluster      string
	EtcdInitialClusterState string
	// EtcdQuotaBytes is the embedded etcd's backend quota; 0 takes the
	// default (etcd.go).
	EtcdQuotaBytes int64
	EtcdPrefix     string
	// EtcdCompaction is the history the embedded etcd keeps; without
	// compaction every heartbeat would grow it until etcd stops writes.
	EtcdCompaction time.Duration

	MetricsListen string // "" disables
	// Pprof serves net/http/pprof under /debug/pprof/ on the metrics
	// listener (--pprof): profiles of a live agent, off by default since
	// they expose internals to whoever reaches that listener.
	Pprof bool

	NodeName          string
	LeaderElect       bool
	LeaderLease       time.Duration
	NodeLease         time.Duration
	HeartbeatInterval time.Duration
	ImageDir          string

	// NodeCertValidity is how long the node certificates this server signs
	// are valid (0: pki.DefaultNodeCertValidity); nodes renew at 2/3.
	NodeCertValidity time.Duration
	// CertCheckInterval is how often the server renews its own
	// certificate when it nears expiry and reloads changed files
	// (0: one minute).
	CertCheckInterval time.Duration
	// APILimits bound each API caller (apiserver.Limits).
	APILimits apiserver.Limits
	// HostPolicy is what instances may take of their node: forwards'
	// host addresses and ports, bridges, libvirt networks
	// (--port-forward-addresses, --port-forward-ports, --allowed-bridges,
	// --allowed-networks); nil is validation.DefaultHostPolicy(). Start
	// adds the ports this agent listens on to its reserved ports.
	HostPolicy *validation.HostPolicy

	ControllerOptions ControllerOptions
	// Audit configures the API's audit trail (audit.go).
	Audit AuditOptions
	// NoControllers serves the API and store only (an API-only server
	// next to others that run the controllers).
	NoControllers bool
	// Controllers replaces the built-in controllers (tests); nil runs them.
	Controllers func(ctx context.Context, deps Deps)

	// ImagePolicy is where nodes may download Images from and the bounds
	// of a download (serve --image-* flags); the API sends it to the
	// nodes. Zero bounds take the defaults; no SourceCIDRs is the default.
	ImagePolicy imagepolicy.Policy

	// Node configures the node agent. Role node always runs it (nil takes
	// the defaults); role all runs it when set, which the serve command
	// always does, while in-process tests that bring fake nodes leave it
	// nil.
	Node *NodeOptions

	Logger *slog.Logger
}

// Deps is what controllers get from the composition root: stores, never a
// raw etcd client, whose writes would escape the leader term.
type Deps struct {
	// Stores are for the controllers' reads and writes; with leader
	// election they are bound to the current term (store.Options.LeaderTerm).
	Stores apiserver.Stores
	Logger *slog.Logger
}

// newStores are the typed stores under prefix; a non-nil term makes their
// writes conditional on that leader term.
func newStores(c *clientv3.Client, prefix string, term *store.LeaderTerm) apiserver.Stores {
	return apiserver.NewStores(c, store.Options{Prefix: prefix + "/registry", LeaderTerm: term})
}

// Complete fills defaults.
func (o *Options) Complete() {
	if o.Role == "" {
		o.Role = RoleAll
	}
	if o.DataDir == "" {
		o.DataDir = "/var/lib/virtplane"
	}
	if o.Socket == "" {
		o.Socket = "/run/virtplane/agent.sock"
	}
	if o.EtcdPrefix == "" {
		o.EtcdPrefix = "/virtplane"
	}
	if o.NodeName == "" {
		o.NodeName, _ = os.Hostname()
	}
	if o.LeaderLease == 0 {
		o.LeaderLease = 15 * time.Second
	}
	if o.NodeLease == 0 {
		o.NodeLease = 40 * time.Second
	}
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 10 * time.Second
	}
	if o.ControllerOptions.VMWorkers == 0 {
		o.ControllerOptions.VMWorkers = 3
	}
	if o.ControllerOptions.VMIWorkers == 0 {
		o.ControllerOptions.VMIWorkers = 10
	}
	if o.ControllerOptions.NodeWorkers == 0 {
		o.ControllerOptions.NodeWorkers = 3
	}
	if o.ControllerOptions.FenceMargin == 0 {
		o.ControllerOptions.FenceMargin = 10 * time.Second
	}
	if o.ImageDir == "" {
		o.ImageDir = filepath.Join(o.DataDir, "images")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Role == RoleNode && o.Node == nil {
		o.Node = &NodeOptions{}
	}
	o.ImagePolicy.Complete()
}

// minLeaderLease is the shortest --leader-lease the agent takes.
const minLeaderLease = 5 * time.Second

// Validate reports flag combinations that cannot work.
func (o *Options) Validate() error {
	switch o.Role {
	case RoleAll, RoleServer, RoleNode:
	default:
		return fmt.Errorf("--role: unsupported value %q: supported values: all, server, node", o.Role)
	}
	if o.LeaderLease < minLeaderLease {
		return fmt.Errorf("--leader-lease (%v) must be at least %v: a shorter election lease expires on ordinary hiccups", o.LeaderLease, minLeaderLease)
	}
	if o.HeartbeatInterval >= o.NodeLease {
		return fmt.Errorf("--heartbeat-interval (%v) must be shorter than --node-lease (%v)", o.HeartbeatInterval, o.NodeLease)
	}
	if err := validateMigration(o.ControllerOptions.Migration); err != nil {
		return err
	}
	if s := o.ControllerOptions.DefaultEvictionStrategy; s != "" && !slices.Contains(apiv1.EvictionStrategies(), s) {
		return fmt.Errorf("--default-eviction-strategy: unsupported value %q: supported values: %s", s, strings.Join(apiv1.EvictionStrategies(), ", "))
	}
	// Before a node joins with its token or registers.
	if o.Node != nil {
		if err := nodeagent.CheckLabels(o.Node.Labels); err != nil {
			return fmt.Errorf("--%w", err)
		}
	}
	if err := o.ImagePolicy.Validate(); err != nil {
		return err
	}
	if err := o.Audit.validate(); err != nil {
		return err
	}
	return o.validateEtcd()
}

// validateMigration refuses migration settings that cannot work; zero
// values (callers that set none) take the defaults.
func validateMigration(m migctl.Options) error {
	for _, c := range []struct {
		flag string
		v    int64
	}{
		{"--migrations-per-cluster", int64(m.ParallelMigrationsPerCluster)},
		{"--migrations-per-node", int64(m.ParallelOutboundMigrationsPerNode)},
		{"--migration-bandwidth", m.BandwidthMiBPerSecond},
		{"--migration-completion-timeout-per-gib", int64(m.CompletionTimeoutPerGiB)},
		{"--migration-progress-timeout", int64(m.ProgressTimeout)},
		{"--migration-max-downtime", int64(m.MaxDowntime)},
		{"--migration-unschedulable-timeout", int64(m.UnschedulableTimeout)},
		{"--migration-target-timeout", int64(m.TargetTimeout)},
	} {
		if c.v < 0 {
			return fmt.Errorf("%s must not be negative", c.flag)
		}
	}
	if m.ParallelOutboundMigrationsPerNode > m.ParallelMigrationsPerCluster && m.ParallelMigrationsPerCluster > 0 {
		return fmt.Errorf("--migrations-per-node (%d) must not exceed --migrations-per-cluster (%d)", m.ParallelOutboundMigrationsPerNode, m.ParallelMigrationsPerCluster)
	}
	return m.Destinations.Validate()
}

// Agent is a running agent.
type Agent struct {
	opts     Options
	log      *slog.Logger
	etcd     *etcdserver.Server // nil with an external cluster
	client   *clientv3.Client
	unixSrv  *grpc.Server
	tcpSrv   *grpc.Server
	httpSrv  *http.Server
	tcpAddr  net.Addr
	metAddr  net.Addr
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	errOnce  sync.Once
	err      error
	done     chan struct{}
	stopOnce sync.Once

	// audit is the API's audit trail; nil keeps none.
	audit *audit.Logger

	nodeCancel context.CancelFunc // the node agent, when running
	nodeDone   chan struct{}
}

// Start brings the agent up and returns once it serves. Stop it with
// Shutdown; Done is closed when it stopped by itself (a listener failed).
func Start(ctx context.Context, o Options) (_ *Agent, retErr error) {
	o.Complete()
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.Role == RoleNode {
		return startNodeOnly(ctx, o)
	}
	o.HostPolicy = o.hostPolicy()
	a := &Agent{opts: o, log: o.Logger, done: make(chan struct{})}
	defer func() {
		if retErr != nil {
			a.Shutdown(context.Background())
		}
	}()
	if err := ensureDataDir(o.DataDir); err != nil {
		return nil, err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := store.RegisterMetrics(reg); err != nil {
		return nil, fmt.Errorf("registering store metrics: %w", err)
	}
	apiMetrics, err := apiserver.NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("registering API metrics: %w", err)
	}
	leaderGauge := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "virtplane_leader", Help: "1 while this agent holds the controller election.",
	})
	reg.MustRegister(leaderGauge)

	if err := a.openStore(ctx); err != nil {
		return nil, err
	}
	usage := a.storageUsage()
	reg.MustRegister(usage)
	quota := apiserver.NewQuotaGuard(usage, clock.RealClock{}, apiserver.QuotaOptions{Logger: o.Logger.With("component", "quota")})
	paths := pki.PathsIn(filepath.Join(o.DataDir, "pki"))
	if err := pki.Ensure(paths, a.sans(), time.Now()); err != nil {
		return nil, fmt.Errorf("preparing TLS material: %w", err)
	}
	ca, err := pki.LoadCA(paths)
	if err != nil {
		return nil, err
	}
	if err := checkClusterCA(ctx, a.client, o.EtcdPrefix, ca); err != nil {
		return nil, err
	}
	// The API's writes are users' requests, not the leader's: unfenced.
	stores := newStores(a.client, o.EtcdPrefix, nil)
	if a.audit, err = openAudit(o, reg, o.Logger.With("component", "audit")); err != nil {
		return nil, err
	}
	api := apiserver.New(stores, apiserver.Options{
		Validation:              validation.Options{ImageDir: o.ImageDir, HostPolicy: o.HostPolicy},
		NodeLease:               o.NodeLease,
		HeartbeatInterval:       o.HeartbeatInterval,
		Logger:                  o.Logger.With("component", "api"),
		CA:                      ca,
		NodeCertValidity:        o.NodeCertValidity,
		Limits:                  o.APILimits,
		Metrics:                 apiMetrics,
		DefaultEvictionStrategy: o.ControllerOptions.DefaultEvictionStrategy,
		MigrationDestinations:   o.ControllerOptions.Migration.Destinations,
		ImagePolicy:             o.ImagePolicy,
		UploadDir:               filepath.Join(o.DataDir, "uploads"),
		BackupTargets:           &target.Reader{Cache: target.NewCache()},
		Audit:                   auditLog(a.audit),
		AuditNodeReports:        o.Audit.NodeReports,
		ServerName:              o.NodeName,
	})

	runCtx, cancel := context.WithCancel(context.Background())
	a.cancel = cancel
	// The node credential cache: node certificates are refused (with
	// Unavailable) until it has loaded.
	a.serve("", func() error { api.Run(runCtx); return nil })
	a.serve("", func() error { quota.Run(runCtx); return nil })

	// Unix socket: the 0600 mode is the authentication (callers are
	// admins, or role all's node agent acting as its node).
	a.unixSrv = grpc.NewServer(api.ServerOptions(apiserver.Listener{Unix: true}, []grpc.UnaryServerInterceptor{quota.Unary}, nil)...)
	api.Register(a.unixSrv)
	ul, err := listenUnix(o.Socket)
	if err != nil {
		return nil, err
	}
	a.serve("unix", func() error { return a.unixSrv.Serve(ul) })

	if o.Listen != "" {
		if err := a.startTCP(runCtx, api, paths, ca, quota.Unary); err != nil {
			return nil, err
		}
	}
	if o.MetricsListen != "" {
		ml, err := net.Listen("tcp", o.MetricsListen)
		if err != nil {
			return nil, fmt.Errorf("--metrics-listen: %w", err)
		}
		a.metAddr = ml.Addr()
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		if o.Pprof {
			mux.HandleFunc("/debug/pprof/", pprof.Index)
			mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
			mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
			mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
			mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		}
		a.httpSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		a.serve("metrics", func() error {
			if err := a.httpSrv.Serve(ml); !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		})
	}

	deps := Deps{Stores: stores, Logger: o.Logger.With("component", "controllers")}
	runControllers := func(ctx context.Context, deps Deps) {
		switch {
		case o.Controllers != nil:
			o.Controllers(ctx, deps)
		case o.NoControllers:
			<-ctx.Done()
		default:
			runControllers(ctx, deps, o)
		}
	}
	if o.LeaderElect {
		el := &leader.Elector{
			Client:   a.client,
			Key:      o.EtcdPrefix + "/leader",
			Identity: o.NodeName + "/" + strconv.Itoa(os.Getpid()),
			TTL:      o.LeaderLease,
			Logger:   o.Logger.With("component", "leader"),
			OnChange: func(leading bool) {
				if leading {
					leaderGauge.Set(1)
				} else {
					leaderGauge.Set(0)
				}
			},
		}
		a.serve("", func() error {
			return el.Run(runCtx, func(ctx context.Context, term store.LeaderTerm) {
				if a.etcd != nil && len(o.EtcdPeerListen) > 0 {
					var wg sync.WaitGroup
					defer wg.Wait()
					wg.Go(func() {
						a.etcd.KeepRaftLeadershipAway(ctx, clock.RealClock{}, o.Logger.With("component", "etcd"))
					})
				}
				// A term's controllers write through stores bound to it,
				// so a leader paused past its lease cannot write after
				// the next one was elected.
				fenced := deps
				fenced.Stores = newStores(a.client, o.EtcdPrefix, &term)
				runControllers(ctx, fenced)
			})
		})
	} else {
		leaderGauge.Set(1)
		a.serve("", func() error { runControllers(runCtx, deps); return nil })
	}
	if o.Role == RoleAll && o.Node != nil {
		// In-process, against the agent's own socket, like any node.
		sock, err := filepath.Abs(o.Socket)
		if err != nil {
			return nil, fmt.Errorf("--socket: %w", err)
		}
		if err := a.startNodeAgent(ctx, client.Config{Endpoint: "unix://" + sock, ActAsNode: o.NodeName}, nil); err != nil {
			return nil, err
		}
	}
	a.log.Info("agent started", "role", o.Role, "socket", o.Socket, "listen", a.tcpAddr,
		"metrics", a.metAddr, "data_dir", o.DataDir, "embedded_etcd", a.etcd != nil)
	return a, nil
}

func (a *Agent) startTCP(ctx context.Context, api *apiserver.Server, paths pki.Paths, ca *pki.CA, quota grpc.UnaryServerInterceptor) error {
	o := a.opts
	tokenFile := paths.Token
	if o.TokenFile != "" {
		tokenFile = o.TokenFile
	}
	token, err := pki.ReadToken(tokenFile)
	if err != nil {
		return err
	}
	// The generated certificate is sent with the CA, which a joining node
	// checks against the pin it was given; an operator's own certificate
	// is sent as it is.
	var kp *pki.KeyPair
	if o.TLSCertFile != "" {
		kp, err = pki.LoadKeyPair(o.TLSCertFile, o.TLSKeyFile)
	} else {
		kp, err = pki.LoadKeyPair(paths.ServerCert, paths.ServerKey, paths.CACert)
	}
	if err != nil {
		return fmt.Errorf("loading server certificate: %w", err)
	}
	var current atomic.Pointer[string]
	current.Store(&token)
	reloadToken := func() {
		if t, err := pki.ReadToken(tokenFile); err != nil {
			a.log.Error("reloading the API token; keeping the current one", "err", err)
		} else if t != *current.Load() {
			current.Store(&t)
			a.log.Info("API token reloaded", "file", tokenFile)
		}
	}
	a.serve("", func() error { a.renewServerCert(ctx, paths, kp, reloadToken); return nil })
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	opts := api.ServerOptions(apiserver.Listener{Token: func() string { return *current.Load() }}, []grpc.UnaryServerInterceptor{quota}, nil)
	a.tcpSrv = grpc.NewServer(append(opts, grpc.Creds(credentials.NewTLS(pki.ServerTLSConfig(kp, pool))))...)
	api.Register(a.tcpSrv)
	l, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	a.tcpAddr = l.Addr()
	a.serve("tcp", func() error { return a.tcpSrv.Serve(l) })
	return nil
}

// sans are the names the server certificate must carry.
func (a *Agent) sans() []string {
	s := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil {
		s = append(s, h)
	}
	if host, _, err := net.SplitHostPort(a.opts.Listen); err == nil && host != "" && host != "0.0.0.0" && host != "::" {
		s = append(s, host)
	}
	return append(s, a.opts.TLSSANs...)
}

// serve runs fn in the background; an error from it stops the agent.
func (a *Agent) serve(name string, fn func() error) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := fn(); err != nil {
			a.errOnce.Do(func() { a.err = fmt.Errorf("%s listener: %w", name, err) })
			a.log.Error("agent component failed", "component", name, "err", err)
			a.stopOnce.Do(func() { close(a.done) })
		}
	}()
}

// Done is closed when a component failed; Err then says why.
func (a *Agent) Done() <-chan struct{} { return a.done }

// Err is the failure that closed Done.
func (a *Agent) Err() error { return a.err }

// TCPAddr is the bound TLS listener address, or nil.
func (a *Agent) TCPAddr() net.Addr { return a.tcpAddr }

// MetricsAddr is the bound metrics address, or nil.
func (a *Agent) MetricsAddr() net.Addr { return a.metAddr }
