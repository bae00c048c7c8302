package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// minEtcdQuota is the smallest --etcd-quota-bytes the agent takes: below
// it a few hundred VMs and their history fill the store.
const minEtcdQuota = 64 << 20

// etcdQuota is --etcd-quota-bytes, or etcd's default.
func (o *Options) etcdQuota() int64 {
	if o.EtcdQuotaBytes == 0 {
		return etcdserver.DefaultQuotaBytes
	}
	return o.EtcdQuotaBytes
}

// validateEtcd reports etcd flag combinations that cannot work.
func (o *Options) validateEtcd() error {
	if len(o.EtcdEndpoints) > 0 && len(o.EtcdListenClient) > 0 {
		return errors.New("--etcd-listen-client applies to the embedded etcd only; drop it or --etcd-endpoints")
	}
	if err := o.validateEtcdPeer(); err != nil {
		return err
	}
	if _, err := etcdserver.ExtraClientURLs(o.EtcdListenClient); err != nil {
		return fmt.Errorf("--etcd-listen-client: %w", err)
	}
	if q := o.EtcdQuotaBytes; q != 0 && q < minEtcdQuota {
		return fmt.Errorf("--etcd-quota-bytes (%d) must be at least %d (64 MiB); etcd's default is %d (2 GiB)", q, minEtcdQuota, etcdserver.DefaultQuotaBytes)
	}
	if o.EtcdCompaction < 0 {
		return fmt.Errorf("--etcd-compaction (%v) must not be negative; 0 keeps all history", o.EtcdCompaction)
	}
	return nil
}

func (a *Agent) openStore(ctx context.Context) error {
	o := a.opts
	if len(o.EtcdEndpoints) == 0 {
		cfg := etcdserver.Config{
			DataDir:           filepath.Join(o.DataDir, etcdserver.DirName),
			QuotaBackendBytes: o.etcdQuota(),
			// Watches that fall behind re-list (store.Watch handles it).
			AutoCompactionRetention: o.EtcdCompaction,
			Logger:                  o.Logger.With("component", "etcd"),
			Name:                    o.EtcdName,
		}
		if len(o.EtcdPeerListen) > 0 {
			peer, err := a.etcdPeer()
			if err != nil {
				return err
			}
			cfg.Peer = peer
		}
		var p pki.EtcdPaths
		if len(o.EtcdListenClient) > 0 {
			var err error
			if p, err = a.ensureEtcdPKI(); err != nil {
				return err
			}
			cfg.ClientURLs = o.EtcdListenClient
			cfg.ClientTLS = &etcdserver.ClientTLS{CertFile: p.ServerCert, KeyFile: p.ServerKey, ClientCAFile: p.CACert}
		}
		srv, err := etcdserver.Start(ctx, cfg)
		if err != nil {
			return fmt.Errorf("starting embedded etcd: %w", err)
		}
		a.etcd = srv
		a.client = srv.Client()
		if cfg.ClientTLS != nil {
			a.log.Info("embedded etcd also serves TLS clients with a certificate of its own CA",
				"listen", srv.ExtraAddrs(), "cacert", p.CACert, "cert", p.ClientCert, "key", p.ClientKey)
		}
		return nil
	}
	var tlsCfg *tls.Config
	if o.EtcdCAFile != "" || o.EtcdCertFile != "" {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		if o.EtcdCAFile != "" {
			pem, err := os.ReadFile(o.EtcdCAFile)
			if err != nil {
				return fmt.Errorf("--etcd-ca-file: %w", err)
			}
			tlsCfg.RootCAs = x509.NewCertPool()
			if !tlsCfg.RootCAs.AppendCertsFromPEM(pem) {
				return fmt.Errorf("--etcd-ca-file %s: no certificates found", o.EtcdCAFile)
			}
		}
		if o.EtcdCertFile != "" {
			pair, err := tls.LoadX509KeyPair(o.EtcdCertFile, o.EtcdKeyFile)
			if err != nil {
				return fmt.Errorf("--etcd-cert-file/--etcd-key-file: %w", err)
			}
			tlsCfg.Certificates = []tls.Certificate{pair}
		}
	}
	c, err := etcdserver.Connect(ctx, o.EtcdEndpoints, tlsCfg)
	if err != nil {
		return fmt.Errorf("connecting to etcd %v: %w", o.EtcdEndpoints, err)
	}
	a.client = c
	return nil
}

// ensureEtcdPKI makes the embedded etcd's own CA, listener certificate and
// operator client certificate under <data-dir>/pki/etcd on first use.
func (a *Agent) ensureEtcdPKI() (pki.EtcdPaths, error) {
	p := pki.EtcdPathsIn(filepath.Join(a.opts.DataDir, "pki"))
	if err := pki.EnsureEtcd(p, a.etcdHosts(), time.Now()); err != nil {
		return p, fmt.Errorf("--etcd-listen-client: preparing its TLS material: %w", err)
	}
	return p, nil
}

// etcdHosts are the names the etcd listener certificate carries: the
// listeners' own hosts, loopback, this host's name and --tls-san.
func (a *Agent) etcdHosts() []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	urls, _ := etcdserver.ExtraClientURLs(a.opts.EtcdListenClient) // validated
	for _, u := range urls {
		if h := u.Hostname(); h != "" {
			if ip := net.ParseIP(h); ip == nil || !ip.IsUnspecified() {
				hosts = append(hosts, h)
			}
		}
	}
	return append(hosts, a.opts.TLSSANs...)
}

// storageUsage reads the store's size against its quota, for the API's
// quota guard and /metrics. For an external cluster the quota is
// --etcd-quota-bytes, which should match the cluster's
// --quota-backend-bytes (etcd does not report it).
func (a *Agent) storageUsage() *etcdserver.UsageReader {
	return etcdserver.NewUsageReader(a.client, a.opts.etcdQuota())
}
