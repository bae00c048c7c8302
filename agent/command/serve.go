package command

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent"
)

func newServeCommand() *cobra.Command {
	var (
		o         server.Options
		logLevel  string
		logFormat string
		shutdown  time.Duration
		overhead  = k8sresource.QuantityValue{Quantity: k8sresource.MustParse("160Mi")}
		node      = &server.NodeOptions{}
		reserved  = k8sresource.QuantityValue{Quantity: k8sresource.MustParse("512Mi")}
		hostFlags hostPolicyFlags
		images    *imagePolicyFlags
	)
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the agent: API server, store and controllers (role server), node handler (role node)",
		Long: `Run the virtplane agent.

With no flags it starts an embedded etcd in --data-dir and serves the API on
the unix socket --socket (local clients need no token). --listen adds a
TLS listener that requires the bearer token written to <data-dir>/pki/token;
clients trust <data-dir>/pki/ca.crt. --etcd-endpoints uses an external etcd
cluster instead of the embedded one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger, err := newLogger(logLevel, logFormat)
			if err != nil {
				return err
			}
			o.Logger = logger
			if err := images.complete(&o.ImagePolicy); err != nil {
				return err
			}
			o.ControllerOptions.MemoryOverhead = overhead.Quantity
			if o.Role == server.RoleAll || o.Role == server.RoleNode {
				node.ReservedMemory = &reserved.Quantity
				node.AgentVersion = Version
				o.Node = node
			}
			if shutdown <= 0 {
				return fmt.Errorf("--shutdown-timeout (%v) must be positive", shutdown)
			}
			if o.HostPolicy, err = hostFlags.policy(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			a, err := server.Start(ctx, o)
			if err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				logger.Info("shutting down", "timeout", shutdown)
			case <-a.Done():
			}
			// A second signal ends the process at once.
			stop()
			// Shutdown returns by this deadline whatever is stuck.
			sctx, cancel := context.WithTimeout(context.Background(), shutdown)
			defer cancel()
			a.Shutdown(sctx)
			return a.Err()
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Role, "role", server.RoleAll, "what this agent runs: all, server or node")
	f.StringVar(&o.DataDir, "data-dir", "/var/lib/virtplane", "state directory: embedded etcd, TLS material, token")
	f.StringVar(&o.Socket, "socket", "/run/virtplane/agent.sock", "unix socket for local clients (mode 0600)")
	f.StringVar(&o.Listen, "listen", "", "optional TLS listener for remote clients, e.g. 0.0.0.0:7443 (token required)")
	f.StringSliceVar(&o.TLSSANs, "tls-san", nil, "extra DNS names or IPs for the generated server certificate")
	f.StringVar(&o.TLSCertFile, "tls-cert-file", "", "server certificate instead of the generated one")
	f.StringVar(&o.TLSKeyFile, "tls-key-file", "", "server key for --tls-cert-file")
	f.StringVar(&o.TokenFile, "token-file", "", "API token file instead of <data-dir>/pki/token")
	f.StringSliceVar(&o.EtcdEndpoints, "etcd-endpoints", nil, "external etcd cluster endpoints; empty starts an embedded etcd")
	f.StringVar(&o.EtcdCAFile, "etcd-ca-file", "", "CA bundle of the external etcd cluster")
	f.StringVar(&o.EtcdCertFile, "etcd-cert-file", "", "client certificate for the external etcd cluster")
	f.StringVar(&o.EtcdKeyFile, "etcd-key-file", "", "client key for the external etcd cluster")
	f.StringSliceVar(&o.EtcdListenClient, "etcd-listen-client", nil, "extra client URLs of the embedded etcd, https only, e.g. https://127.0.0.1:2379; clients need <data-dir>/pki/etcd/client.crt and client.key, and trust ca.crt there")
	f.StringVar(&o.EtcdName, "etcd-name", "", "the embedded etcd member's name, unique in its cluster (default \"virtplane\" alone, the host name with --etcd-peer-listen)")
	f.StringSliceVar(&o.EtcdPeerListen, "etcd-peer-listen", nil, "makes the embedded etcd a member of a cluster of servers: the https://host:port its peers reach it at (mutual TLS with <data-dir>/pki/etcd)")
	f.StringVar(&o.EtcdInitialCluster, "etcd-initial-cluster", "", "with --etcd-peer-listen: every member of a new cluster, name=https://host:port,... (the same on each); read only on the member's first start")
	f.StringVar(&o.EtcdInitialClusterState, "etcd-initial-cluster-state", "new", "new forms a cluster; existing joins a running one after `store member add` (which prints the flags), with <data-dir>/pki copied from a server of it")
	f.Int64Var(&o.EtcdQuotaBytes, "etcd-quota-bytes", 2<<30, "the embedded etcd's storage quota (at least 64 MiB); VM writes are refused from 90% of it. With --etcd-endpoints: the cluster's --quota-backend-bytes, for /metrics and that refusal")
	f.DurationVar(&o.EtcdCompaction, "etcd-compaction", 10*time.Minute, "history the embedded etcd keeps before compacting it (0 keeps everything)")
	f.StringVar(&o.EtcdPrefix, "etcd-prefix", "/virtplane", "key prefix in etcd")
	f.StringVar(&o.MetricsListen, "metrics-listen", "127.0.0.1:9464", "Prometheus /metrics listener; empty disables")
	f.BoolVar(&o.Pprof, "pprof", false, "also serve Go profiles under /debug/pprof/ on the metrics listener")
	f.StringVar(&o.NodeName, "node-name", "", "this host's node name (default: host name)")
	var controllers bool
	f.BoolVar(&controllers, "controllers", true, "run the VM, VMI and node controllers (while leading); false serves the API only")
	cmd.PreRun = func(*cobra.Command, []string) { o.NoControllers = !controllers }
	f.BoolVar(&o.LeaderElect, "leader-elect", true, "run controllers only while holding the etcd leader election")
	f.DurationVar(&o.LeaderLease, "leader-lease", 15*time.Second, "leader election session TTL")
	f.DurationVar(&o.NodeLease, "node-lease", 40*time.Second, "fencing lease granted to node agents per heartbeat")
	f.DurationVar(&o.HeartbeatInterval, "heartbeat-interval", 10*time.Second, "how often node agents heartbeat")
	f.DurationVar(&o.ControllerOptions.FenceMargin, "fence-margin", 10*time.Second, "safety margin after a node lease before RestartElsewhere VMs move (docs/failover.md)")
	f.StringVar(&o.ControllerOptions.ClusterName, "cluster-name", "virtplane", "this cluster's label in the backups it writes, which other clusters reading the same target list (docs/backups.md)")
	f.Var(&overhead, "vm-memory-overhead", "memory reserved per VM beyond its guest memory at placement")
	f.Int64Var(&o.ControllerOptions.CPUAllocationRatio, "cpu-allocation-ratio", 10, "vCPUs placed per host CPU")
	addMigrationFlags(f, &o.ControllerOptions.Migration)
	f.StringVar(&o.ControllerOptions.DefaultEvictionStrategy, "default-eviction-strategy", apiv1.DefaultEvictionStrategy,
		"what a drain does with a VM that sets no eviction_strategy: "+strings.Join(apiv1.EvictionStrategies(), ", ")+" (docs/operations.md)")
	f.StringVar(&o.ImageDir, "image-dir", "", "node image directory (default <data-dir>/images)")
	images = addImagePolicyFlags(f, &o.ImagePolicy)
	f.DurationVar(&shutdown, "shutdown-timeout", 10*time.Second, "how long stopping may take on SIGTERM: open calls finish, then controllers and etcd stop; what has not stopped by then is logged and left")
	// Node agent (roles all and node).
	f.StringVar(&node.Server.Endpoint, "server", "", "role node: the server's endpoint, unix:///path, host:port or https://host:port, or the servers of one control plane comma-separated (default the local socket "+client.DefaultEndpoint+")")
	f.StringVar(&node.Server.CAFile, "server-ca-file", "", "role node: PEM CA bundle to verify the server; system roots when empty")
	f.StringVar(&node.LibvirtURI, "libvirt-uri", launcher.DefaultLibvirtURI, "libvirt connection URI the launchers use")
	f.StringVar(&node.Migration.Address, "migration-address", "", "role node: this node's IP that live migrations come to (its libvirtd on the cluster's --migration-transport and --migration-libvirt-port, and QEMU's stream), registered with the node; empty: the node receives no migrations")
	f.StringVar(&node.ExportAddress, "export-address", "", "role node: IP:port this node serves VM exports at over HTTPS (docs/export.md), registered with the node; export links are built from it, so it must be an address clients reach; empty: the node serves no exports")
	f.StringVar(&node.QEMUPidDir, "qemu-pid-dir", launcher.DefaultQEMUPidDir, "where that libvirtd writes QEMU pid files, as seen from this host (launchers report QEMU's pid from it)")
	f.StringVar(&node.BridgeNetNS, "bridge-netns", "", "role node: the network namespace (/proc/PID/ns/net, /run/netns/NAME) whose Linux bridges this node offers guests, that of its libvirtd (default: the namespace of the daemon listening on --libvirt-uri's socket, else this agent's own)")
	f.StringVar(&node.LauncherPath, "launcher-path", "", "virtplane-launcher binary (default: next to this executable, else from PATH)")
	f.StringVar(&node.DataDir, "node-data-dir", "", "node state database and per-VMI files (default <data-dir>/node)")
	f.StringSliceVar(&node.ImageSourceDirs, "image-source-dir", nil, "directories Images' file:// URLs may name on this node (default: none, file:// refused)")
	f.StringSliceVar(&node.AdoptDirs, "adopt-dir", nil, "role node: directories whose files the disks of adopted libvirt domains may be (docs/adopt.md; default: none, every disk refused); not the node data or image directory")
	f.Var(&reserved, "reserved-memory", "host memory kept from guests: allocatable = total memory minus this")
	f.IntVar(&node.Workers, "node-workers", nodeagent.DefaultWorkers, "VMIs the node agent handles at once (starts, stops); default twice the CPUs, at least 4")
	f.DurationVar(&node.StorageStartTimeout, "storage-start-timeout", nodeagent.DefaultStorageStartTimeout, "role node: a VM with an rbd volume whose QEMU has not opened it this long after its start (an OSD that does not answer) is stopped, and fails saying so; under 2m")
	f.StringToStringVar(&node.Labels, "node-labels", nil, "labels this node registers with, k=v,k2=v2: only under "+apiv1.NodeLabelPrefix+
		" (the node's own; "+apiv1.LabelKVM+" is set by the agent); every other label of a node is an admin's (node label NODE k=v)")
	addIdentityFlags(f, &o, node)
	addHostPolicyFlags(f, &hostFlags)
	addAuditFlags(f, &o.Audit)
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&logFormat, "log-format", "text", "text or json")
	return cmd
}

func newLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	ho := &slog.HandlerOptions{Level: l}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, ho)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, ho)), nil
	}
	return nil, fmt.Errorf("--log-format: unsupported value %q: supported values: text, json", format)
}
