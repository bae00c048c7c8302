// Package etcdtest holds what tests of etcd's client listeners share: a
// TLS configuration that trusts a CA file, and a bounded read through a
// listener with it. Both internal/etcdserver and the agent's server test
// that a listener serves only the etcd CA's client certificates.
package etcdtest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Trusting is a TLS client configuration that verifies servers with the
// PEM CA in caFile and presents no certificate.
func Trusting(t testing.TB, caFile string) *tls.Config {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(b)
	return &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// Get reads key through the client URL ep with tlsCfg (nil: plain
// http); "" when there is no such key. It is bounded, so that a refused
// handshake, which the client retries, fails within seconds.
func Get(t testing.TB, ep string, tlsCfg *tls.Config, key string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, TLS: tlsCfg, DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return "", err
	}
	defer cli.Close()
	resp, err := cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return "", err
	}
	return string(resp.Kvs[0].Value), nil
}
