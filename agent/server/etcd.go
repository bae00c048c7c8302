package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
)

// validateEtcd reports etcd flag combinations that cannot work.
func (o *Options) validateEtcd() error {
	if len(o.EtcdEndpoints) > 0 && len(o.EtcdListenClient) > 0 {
		return errors.New("--etcd-listen-client applies to the embedded etcd only; drop it or --etcd-endpoints")
	}
	return nil
}

func (a *Agent) openStore(ctx context.Context) error {
	o := a.opts
	if len(o.EtcdEndpoints) == 0 {
		srv, err := etcdserver.Start(ctx, etcdserver.Config{
			DataDir:    filepath.Join(o.DataDir, "etcd"),
			ClientURLs: o.EtcdListenClient,
			// Watches that fall behind re-list (store.Watch handles it).
			AutoCompactionRetention: o.EtcdCompaction,
			Logger:                  o.Logger.With("component", "etcd"),
		})
		if err != nil {
			return fmt.Errorf("starting embedded etcd: %w", err)
		}
		a.etcd = srv
		a.client = srv.Client()
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
