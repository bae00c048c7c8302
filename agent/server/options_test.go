package server

import (
	"net/netip"
	"strings"
	"testing"
	"time"
)

// Flag values that cannot work are refused naming the flag.
func TestValidateRefusesFlagsThatCannotWork(t *testing.T) {
	checkValidate(t, []validateCase{
		{"defaults", func(*Options) {}, ""},
		{"leader lease at the floor", func(o *Options) { o.LeaderLease = 5 * time.Second }, ""},
		{"leader lease too short", func(o *Options) { o.LeaderLease = 2 * time.Second }, "--leader-lease (2s) must be at least 5s"},
		{"heartbeat not shorter than the lease", func(o *Options) { o.HeartbeatInterval, o.NodeLease = time.Minute, time.Minute }, "--heartbeat-interval"},
		{"unknown role", func(o *Options) { o.Role = "both" }, "--role"},
		{"negative migration bandwidth", func(o *Options) { o.ControllerOptions.Migration.BandwidthMiBPerSecond = -1 }, "--migration-bandwidth must not be negative"},
		{"more per node than per cluster", func(o *Options) {
			o.ControllerOptions.Migration.ParallelMigrationsPerCluster, o.ControllerOptions.Migration.ParallelOutboundMigrationsPerNode = 2, 3
		}, "--migrations-per-node (3) must not exceed --migrations-per-cluster (2)"},
		{"tcp migrations", func(o *Options) { o.ControllerOptions.Migration.Destinations.Transport = "tcp" }, ""},
		{"an ext transport", func(o *Options) { o.ControllerOptions.Migration.Destinations.Transport = "ext" }, "--migration-transport: unsupported value \"ext\""},
		{"a port too large", func(o *Options) { o.ControllerOptions.Migration.Destinations.Port = 65536 }, "--migration-libvirt-port"},
		{"a network with host bits", func(o *Options) {
			o.ControllerOptions.Migration.Destinations.Networks = []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8")}
		}, "--migration-networks: 10.1.2.3/8 is not a network address (want 10.0.0.0/8)"},
	})
}

// validateCase is flag values set on completed defaults, and the error
// Validate must give.
type validateCase struct {
	name string
	set  func(*Options)
	want string // "" = valid; else a part of the error
}

// checkValidate validates each case's options.
func checkValidate(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, c := range cases {
		o := Options{}
		c.set(&o)
		o.Complete()
		err := o.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

// Cluster flags that cannot form or join a cluster are refused naming
// the flag.
func TestValidateEtcdClusterFlags(t *testing.T) {
	peer := []string{"https://127.0.0.1:2380"}
	checkValidate(t, []validateCase{
		{"first member", func(o *Options) { o.EtcdName, o.EtcdPeerListen = "s0", peer }, ""},
		{"name defaults to the host name", func(o *Options) { o.EtcdPeerListen = peer }, ""},
		{"joining member", func(o *Options) {
			o.EtcdName, o.EtcdPeerListen = "s1", peer
			o.EtcdInitialCluster, o.EtcdInitialClusterState = "s0=https://127.0.0.1:2380,s1=https://127.0.0.1:2381", "existing"
		}, ""},
		{"initial cluster without peer listen", func(o *Options) { o.EtcdInitialCluster = "s0=https://127.0.0.1:2380" }, "--etcd-initial-cluster needs --etcd-peer-listen"},
		{"state without peer listen", func(o *Options) { o.EtcdInitialClusterState = "existing" }, "--etcd-initial-cluster-state needs --etcd-peer-listen"},
		{"plain-text peers", func(o *Options) { o.EtcdPeerListen = []string{"http://127.0.0.1:2380"} }, "--etcd-peer-listen"},
		{"peers and an external cluster", func(o *Options) {
			o.EtcdPeerListen, o.EtcdEndpoints = peer, []string{"https://127.0.0.1:2379"}
		}, "--etcd-endpoints"},
		{"bad member name", func(o *Options) { o.EtcdName, o.EtcdPeerListen = "s 0", peer }, "--etcd-name"},
		{"existing without the cluster", func(o *Options) { o.EtcdPeerListen, o.EtcdInitialClusterState = peer, "existing" }, "needs --etcd-initial-cluster"},
		{"unknown state", func(o *Options) { o.EtcdPeerListen, o.EtcdInitialClusterState = peer, "joined" }, `unsupported value "joined"`},
		{"malformed initial cluster", func(o *Options) { o.EtcdPeerListen, o.EtcdInitialCluster = peer, "s0" }, "--etcd-initial-cluster"},
	})
}

// --node-labels takes only the node's own labels, refused at start (before
// the node joins or registers) naming the flag and the key.
func TestValidateNodeLabels(t *testing.T) {
	labels := func(l map[string]string) func(*Options) {
		return func(o *Options) { o.Node = &NodeOptions{Labels: l} }
	}
	checkValidate(t, []validateCase{
		{"the node's own", labels(map[string]string{"node.virtplane.io/disk": "ssd"}), ""},
		{"an admin's", labels(map[string]string{"tier": "secure"}),
			"--node-labels[tier]: Forbidden: a node may set only labels under node.virtplane.io/"},
		{"the agent's", labels(map[string]string{"node.virtplane.io/kvm": "true"}), "--node-labels[node.virtplane.io/kvm]: Forbidden"},
	})
}
