package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// EtcdMember is one member of an external etcd cluster: Debian's etcd
// (etcd-server) on loopback ports, with client-certificate TLS for
// clients and peers alike.
type EtcdMember struct {
	Name      string
	ClientURL string
	PeerURL   string
	DataDir   string
	Proc      *proc.Proc
	Starts    int
	args      []string
}

// Alive reports whether the member's process runs.
func (m *EtcdMember) Alive() bool { return m.Proc.Alive() }

// Kill SIGKILLs the member and waits until it is gone.
func (m *EtcdMember) Kill() error { return m.Proc.Kill() }

// externalEtcdMembers is the size of an external cluster.
const externalEtcdMembers = 3

// EtcdEndpoints are the external cluster's client URLs.
func (c *Cluster) EtcdEndpoints() []string {
	var eps []string
	for _, m := range c.Etcd {
		eps = append(eps, m.ClientURL)
	}
	return eps
}

// startEtcd starts a three-member etcd cluster with certificates from a
// CA of its own (the agent's etcd PKI code makes them: the member
// certificate serves clients, the peer certificate the raft links, the
// operator certificate is the servers' client certificate) and waits
// until it answers.
func (c *Cluster) startEtcd(ctx context.Context) error {
	if _, err := exec.LookPath(c.etcdBinary()); err != nil {
		return fmt.Errorf("an external etcd cluster needs %s (Debian: etcd-server): %w", c.etcdBinary(), err)
	}
	p := c.etcdPKI()
	hosts := []string{"127.0.0.1", "localhost"}
	if err := errors.Join(pki.EnsureEtcd(p, hosts, time.Now()), pki.EnsureEtcdPeer(p, hosts, time.Now())); err != nil {
		return err
	}
	var initial []string
	for i := range externalEtcdMembers {
		ca, err := proc.FreeAddr("tcp")
		if err != nil {
			return err
		}
		pa, err := proc.FreeAddr("tcp")
		if err != nil {
			return err
		}
		m := &EtcdMember{Name: "e" + strconv.Itoa(i), DataDir: filepath.Join(c.Dir, "etcd-"+strconv.Itoa(i)),
			ClientURL: "https://" + ca.String(), PeerURL: "https://" + pa.String()}
		initial = append(initial, m.Name+"="+m.PeerURL)
		c.Etcd = append(c.Etcd, m)
	}
	for _, m := range c.Etcd {
		m.args = []string{"--name", m.Name, "--data-dir", m.DataDir,
			"--listen-client-urls", m.ClientURL, "--advertise-client-urls", m.ClientURL,
			"--listen-peer-urls", m.PeerURL, "--initial-advertise-peer-urls", m.PeerURL,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "virtplane-test",
			"--cert-file", p.ServerCert, "--key-file", p.ServerKey, "--trusted-ca-file", p.CACert, "--client-cert-auth",
			"--peer-cert-file", p.PeerCert, "--peer-key-file", p.PeerKey, "--peer-trusted-ca-file", p.CACert,
			"--peer-client-cert-auth", "--peer-cert-allowed-cn", pki.EtcdPeerName,
			"--logger", "zap", "--log-outputs", "stderr"}
		if err := c.StartEtcdMember(m); err != nil {
			return err
		}
	}
	return c.waitEtcd(ctx)
}

// etcdBinary is Options.EtcdBinary, or etcd on PATH.
func (c *Cluster) etcdBinary() string {
	if c.opts.EtcdBinary != "" {
		return c.opts.EtcdBinary
	}
	return "etcd"
}

// StartEtcdMember starts m (again, after a kill, with its data).
func (c *Cluster) StartEtcdMember(m *EtcdMember) error {
	log := filepath.Join(c.Dir, m.Name+".log")
	if m.Starts > 0 {
		log = filepath.Join(c.Dir, fmt.Sprintf("%s-restart%d.log", m.Name, m.Starts))
	}
	m.Starts++
	var err error
	m.Proc, err = proc.Start(proc.DiesWithParent, "etcd "+m.Name, log, c.etcdBinary(), m.args...)
	return err
}

// waitEtcd waits until the external cluster has a leader and answers a
// linearizable read.
func (c *Cluster) waitEtcd(ctx context.Context) error {
	tlsCfg, err := c.etcdClientTLS()
	if err != nil {
		return err
	}
	var last error
	werr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, c.opts.JoinTimeout, true, func(ctx context.Context) (bool, error) {
		for _, m := range c.Etcd {
			if !m.Alive() {
				return false, fmt.Errorf("etcd %s exited: %s", m.Name, multinode.TailFile(m.Proc.Log, 4000))
			}
		}
		cli, err := etcdserver.Connect(ctx, c.EtcdEndpoints(), tlsCfg)
		if err != nil {
			last = err
			return false, nil
		}
		defer cli.Close()
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, last = cli.Get(rctx, "health")
		return last == nil, nil
	})
	if werr != nil {
		return fmt.Errorf("external etcd cluster not answering: %w (last: %v)", werr, last)
	}
	return nil
}

// etcdClientTLS is the operator's client TLS for the external cluster.
func (c *Cluster) etcdClientTLS() (*tls.Config, error) {
	p := c.etcdPKI()
	cert, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(p.CACert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s holds no certificate", p.CACert)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
