package etcdserver

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver/etcdtest"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// startTLS starts a member with one extra https listener on a port of the
// system's choice, secured by a fresh etcd PKI below pkiDir.
func startTLS(t *testing.T, pkiDir string) (*Server, pki.EtcdPaths, string) {
	t.Helper()
	p := pki.EtcdPathsIn(pkiDir)
	if err := pki.EnsureEtcd(p, []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	s, err := Start(t.Context(), Config{
		DataDir:    t.TempDir(),
		ClientURLs: []string{"https://127.0.0.1:0"},
		ClientTLS:  &ClientTLS{CertFile: p.ServerCert, KeyFile: p.ServerKey, ClientCAFile: p.CACert},
		Logger:     testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addrs := s.ExtraAddrs()
	if len(addrs) != 1 {
		t.Fatalf("extra listeners %v, want one", addrs)
	}
	return s, p, "https://" + addrs[0].String()
}

// An extra listener serves only clients with a certificate of the etcd
// CA: not anonymous ones, and not nodes, whose certificates the agent CA
// signs. Before, --etcd-listen-client served plain http to anyone.
func TestExtraListenerRequiresEtcdClientCert(t *testing.T) {
	t.Parallel()
	pkiDir := t.TempDir()
	s, p, ep := startTLS(t, pkiDir)
	if _, err := s.Client().Put(t.Context(), "/secret", "cloud-init password"); err != nil {
		t.Fatal(err)
	}

	// The operator's generated certificate works.
	withCert := etcdtest.Trusting(t, p.CACert)
	pair, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	withCert.Certificates = []tls.Certificate{pair}
	if v, err := etcdtest.Get(t, ep, withCert, "/secret"); err != nil || v != "cloud-init password" {
		t.Fatalf("with the operator certificate: %q %v", v, err)
	}

	// No certificate: refused.
	if v, err := etcdtest.Get(t, ep, etcdtest.Trusting(t, p.CACert), "/secret"); err == nil {
		t.Fatalf("a client without a certificate read %q", v)
	}

	// A node's certificate, signed by the agent CA: refused.
	agent := pki.PathsIn(pkiDir)
	if err := pki.Ensure(agent, []string{"localhost"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ca, err := pki.LoadCA(agent)
	if err != nil {
		t.Fatal(err)
	}
	nk, err := pki.NewNodeKey("node-1")
	if err != nil {
		t.Fatal(err)
	}
	_, certPEM, err := ca.SignNodeCSR(nk.CSRPEM, "node-1", time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(nk.Key)
	if err != nil {
		t.Fatal(err)
	}
	nodePair, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	if err != nil {
		t.Fatal(err)
	}
	asNode := etcdtest.Trusting(t, p.CACert)
	// Sent whatever CAs the server asks for (Go's client would otherwise
	// keep a certificate of another CA to itself).
	asNode.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &nodePair, nil }
	if v, err := etcdtest.Get(t, ep, asNode, "/secret"); err == nil {
		t.Fatalf("a node certificate read %q", v)
	}

	// Plain http on the same port gets nothing either.
	if v, err := etcdtest.Get(t, strings.Replace(ep, "https://", "http://", 1), nil, "/secret"); err == nil {
		t.Fatalf("plain http read %q", v)
	}
}

// Listeners without TLS are refused before anything starts.
func TestPlainExtraListenerRefused(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:0", "unix://" + filepath.Join(t.TempDir(), "x.sock"), "ftp://127.0.0.1:0"} {
		s, err := Start(t.Context(), Config{DataDir: t.TempDir(), ClientURLs: []string{u}, Logger: testLogger(t)})
		if err == nil {
			s.Close()
			t.Fatalf("%s: started", u)
		}
		if !strings.Contains(err.Error(), u) {
			t.Errorf("%s: error does not name the URL: %v", u, err)
		}
	}
	// https without TLS material is refused too.
	s, err := Start(t.Context(), Config{DataDir: t.TempDir(), ClientURLs: []string{"https://127.0.0.1:0"}, Logger: testLogger(t)})
	if err == nil {
		s.Close()
		t.Fatal("https without ClientTLS started")
	} else if !strings.Contains(err.Error(), "ClientTLS") {
		t.Errorf("https without ClientTLS: %v", err)
	}
}
