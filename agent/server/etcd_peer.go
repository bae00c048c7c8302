package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// Values of --etcd-initial-cluster-state.
const (
	clusterStateNew      = "new"
	clusterStateExisting = "existing"
)

// validateEtcdPeer reports cluster flags that cannot work. The member
// name defaults to the host name once the member has peers.
func (o *Options) validateEtcdPeer() error {
	clustered := len(o.EtcdPeerListen) > 0
	if !clustered {
		switch {
		case o.EtcdInitialCluster != "":
			return errors.New("--etcd-initial-cluster needs --etcd-peer-listen (the URL this member's peers reach it at)")
		case o.EtcdInitialClusterState != "" && o.EtcdInitialClusterState != clusterStateNew:
			return errors.New("--etcd-initial-cluster-state needs --etcd-peer-listen")
		}
		if o.EtcdName != "" {
			return etcdserver.ValidMemberName(o.EtcdName)
		}
		return nil
	}
	if len(o.EtcdEndpoints) > 0 {
		return errors.New("--etcd-peer-listen makes the embedded etcd a cluster member; with --etcd-endpoints there is none: drop one of them")
	}
	if _, err := etcdserver.ParsePeerURLs(o.EtcdPeerListen); err != nil {
		return fmt.Errorf("--etcd-peer-listen: %w", err)
	}
	if o.EtcdName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("--etcd-name: the host name is the default and cannot be read: %w", err)
		}
		o.EtcdName = strings.ToLower(h)
	}
	if err := etcdserver.ValidMemberName(o.EtcdName); err != nil {
		return fmt.Errorf("--etcd-name: %w", err)
	}
	if o.EtcdInitialCluster != "" {
		if _, err := etcdserver.ParseInitialCluster(o.EtcdInitialCluster); err != nil {
			return fmt.Errorf("--etcd-initial-cluster: %w", err)
		}
	}
	switch o.EtcdInitialClusterState {
	case "", clusterStateNew:
	case clusterStateExisting:
		if o.EtcdInitialCluster == "" {
			return errors.New("--etcd-initial-cluster-state existing needs --etcd-initial-cluster, as `virtplane-agent store member add` printed it")
		}
	default:
		return fmt.Errorf("--etcd-initial-cluster-state: unsupported value %q: supported values: new, existing", o.EtcdInitialClusterState)
	}
	return nil
}

// etcdPeer is the embedded member's cluster configuration, with its peer
// certificate from the etcd CA in <data-dir>/pki/etcd. A member joining
// a running cluster must carry that cluster's PKI already: a CA made here
// would be trusted by no other member.
func (a *Agent) etcdPeer() (*etcdserver.Peer, error) {
	o := a.opts
	pkiDir := filepath.Join(o.DataDir, "pki")
	p := pki.EtcdPathsIn(pkiDir)
	join := o.EtcdInitialClusterState == clusterStateExisting
	if join && !dataDirHasEtcd(o.DataDir) {
		for _, f := range []string{pki.PathsIn(pkiDir).CAKey, p.CAKey} {
			if _, err := os.Stat(f); err != nil {
				return nil, fmt.Errorf("--etcd-initial-cluster-state existing: %s is missing: copy <data-dir>/pki from a server of the cluster first (it holds the CAs every server shares and the API token): %w", f, err)
			}
		}
	}
	urls, _ := etcdserver.ParsePeerURLs(o.EtcdPeerListen) // validated
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	for _, u := range urls {
		hosts = append(hosts, u.Hostname())
	}
	if err := pki.EnsureEtcdPeer(p, hosts, time.Now()); err != nil {
		return nil, fmt.Errorf("--etcd-peer-listen: preparing the peer certificate: %w", err)
	}
	return &etcdserver.Peer{
		URLs:           o.EtcdPeerListen,
		InitialCluster: o.EtcdInitialCluster,
		Join:           join,
		TLS:            etcdserver.PeerTLS{CertFile: p.PeerCert, KeyFile: p.PeerKey, CAFile: p.CACert, AllowedCN: pki.EtcdPeerName},
	}, nil
}

// dataDirHasEtcd reports whether the embedded member has data already
// (then etcd ignores the initial cluster flags).
func dataDirHasEtcd(dataDir string) bool {
	_, err := os.Stat(filepath.Join(dataDir, etcdserver.DirName, "member"))
	return err == nil
}

// clusterCAKey holds the hash of the agent CA the servers of one store
// share; the first server to start records it.
const clusterCAKey = "/cluster/ca-hash"

// checkClusterCA refuses to serve with an agent CA other than the one the
// store's other servers use: nodes pin that CA and its certificates, so
// a server with a CA of its own would reject every node and every client
// that trusts the cluster.
func checkClusterCA(ctx context.Context, cli *clientv3.Client, prefix string, ca *pki.CA) error {
	key := prefix + clusterCAKey
	hash := ca.Hash()
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, hash)).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return fmt.Errorf("recording the cluster's CA: %w", err)
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) == 1 && string(kvs[0].Value) != hash {
		return fmt.Errorf("this server's CA (%s) is not the one the other servers of this store use (%s): copy <data-dir>/pki from one of them before the first start", hash, kvs[0].Value)
	}
	return nil
}
