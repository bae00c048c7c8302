package pki

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The etcd PKI is its own: a CA apart from the agent's, a server
// certificate for the listeners' hosts and an operator client certificate,
// keys 0600 in a 0700 directory, kept across runs.
func TestEnsureEtcd(t *testing.T) {
	pkiDir := t.TempDir()
	agent := PathsIn(pkiDir)
	now := time.Now()
	if err := Ensure(agent, []string{"localhost"}, now); err != nil {
		t.Fatal(err)
	}
	p := EtcdPathsIn(pkiDir)
	if p.Dir != filepath.Join(pkiDir, "etcd") {
		t.Fatalf("etcd pki dir %s", p.Dir)
	}
	if err := EnsureEtcd(p, []string{"127.0.0.1", "etcd.example.test"}, now); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(p.Dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("etcd pki dir mode %v %v", st.Mode(), err)
	}
	for _, key := range []string{p.CAKey, p.ServerKey, p.ClientKey} {
		if st, err := os.Stat(key); err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %v %v", key, st.Mode(), err)
		}
	}
	ca := readCert(t, p.CACert)
	srv := readCert(t, p.ServerCert)
	cli := readCert(t, p.ClientCert)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := srv.Verify(x509.VerifyOptions{Roots: roots, DNSName: "127.0.0.1", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("server certificate: %v", err)
	}
	if err := srv.VerifyHostname("etcd.example.test"); err != nil {
		t.Errorf("server certificate: %v", err)
	}
	if _, err := cli.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if cli.Subject.CommonName != EtcdClientName {
		t.Errorf("client certificate CN %q", cli.Subject.CommonName)
	}

	// Not the agent CA: a certificate the agent CA signs (a node's) must
	// not pass as an etcd client, and the etcd CA is a different key.
	agentCA := readCert(t, agent.CACert)
	if agentCA.Equal(ca) || string(agentCA.RawSubjectPublicKeyInfo) == string(ca.RawSubjectPublicKeyInfo) {
		t.Fatal("the etcd CA is the agent CA")
	}
	agentSigned := readCert(t, agent.ServerCert)
	if _, err := agentSigned.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err == nil {
		t.Fatal("a certificate of the agent CA verifies against the etcd CA")
	}

	// A second run keeps everything; a new host reissues only the server
	// certificate, under the same CA.
	if err := EnsureEtcd(p, []string{"127.0.0.1"}, now); err != nil {
		t.Fatal(err)
	}
	if !readCert(t, p.ServerCert).Equal(srv) || !readCert(t, p.ClientCert).Equal(cli) || !readCert(t, p.CACert).Equal(ca) {
		t.Fatal("certificates reissued without need")
	}
	if err := EnsureEtcd(p, []string{"127.0.0.1", "::1"}, now); err != nil {
		t.Fatal(err)
	}
	if srv2 := readCert(t, p.ServerCert); srv2.Equal(srv) || srv2.VerifyHostname("::1") != nil {
		t.Fatal("server certificate not reissued for a new host")
	}
	if !readCert(t, p.ClientCert).Equal(cli) {
		t.Fatal("client certificate reissued for a server host")
	}
	// Close to expiry: both leaves are renewed, the CA stays.
	if err := EnsureEtcd(p, []string{"127.0.0.1"}, now.Add(serverValidity-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if readCert(t, p.ClientCert).Equal(cli) {
		t.Fatal("expiring client certificate not renewed")
	}
	if !readCert(t, p.CACert).Equal(ca) {
		t.Fatal("etcd CA changed")
	}
}
