package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"testing"
	"time"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnsureCreatesAndKeeps(t *testing.T) {
	p := PathsIn(t.TempDir())
	now := time.Now()
	if err := Ensure(p, []string{"localhost", "127.0.0.1"}, now); err != nil {
		t.Fatal(err)
	}
	tok1, err := ReadToken(p.Token)
	if err != nil || len(tok1) != 64 {
		t.Fatalf("token %q err %v", tok1, err)
	}
	st, _ := os.Stat(p.Token)
	if st.Mode().Perm() != 0o600 {
		t.Fatalf("token mode %v", st.Mode())
	}
	ca := readCert(t, p.CACert)
	srv := readCert(t, p.ServerCert)
	if err := srv.CheckSignatureFrom(ca); err != nil {
		t.Fatal(err)
	}
	if err := srv.VerifyHostname("127.0.0.1"); err != nil {
		t.Fatal(err)
	}

	// Second run keeps everything.
	if err := Ensure(p, []string{"localhost"}, now); err != nil {
		t.Fatal(err)
	}
	if tok2, _ := ReadToken(p.Token); tok2 != tok1 {
		t.Fatal("token changed")
	}
	if !readCert(t, p.ServerCert).Equal(srv) {
		t.Fatal("server certificate reissued without need")
	}

	// A new SAN reissues the server certificate, signed by the same CA.
	if err := Ensure(p, []string{"localhost", "vp.example.test"}, now); err != nil {
		t.Fatal(err)
	}
	srv2 := readCert(t, p.ServerCert)
	if srv2.Equal(srv) || srv2.VerifyHostname("vp.example.test") != nil || srv2.CheckSignatureFrom(ca) != nil {
		t.Fatal("server certificate not reissued for new SAN")
	}
	// Close to expiry: reissued.
	if err := Ensure(p, []string{"localhost"}, now.Add(serverValidity-24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if readCert(t, p.ServerCert).Equal(srv2) {
		t.Fatal("expiring certificate not renewed")
	}
	if !readCert(t, p.CACert).Equal(ca) {
		t.Fatal("CA changed")
	}
}

// A server renews its certificate while running: Ensure reissues it near
// expiry and the KeyPair presents the new one on the next handshake.
func TestKeyPairPresentsRenewedCertificate(t *testing.T) {
	p := PathsIn(t.TempDir())
	t0 := time.Now()
	if err := Ensure(p, []string{"localhost"}, t0); err != nil {
		t.Fatal(err)
	}
	kp, err := LoadKeyPair(p.ServerCert, p.ServerKey, p.CACert)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(p)
	if err != nil {
		t.Fatal(err)
	}
	first := handshake(t, kp, ca, t0)
	if changed, err := kp.Reload(); err != nil || changed {
		t.Fatalf("reload of unchanged files: changed %v, err %v", changed, err)
	}
	later := t0.Add(serverValidity - renewBefore + time.Hour)
	if err := Ensure(p, []string{"localhost"}, later); err != nil {
		t.Fatal(err)
	}
	if changed, err := kp.Reload(); err != nil || !changed {
		t.Fatalf("reload after renewal: changed %v, err %v", changed, err)
	}
	if second := handshake(t, kp, ca, later); second.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("the renewed certificate is not presented")
	}
	if _, err := LoadKeyPair(p.ServerCert, p.CAKey); err == nil {
		t.Fatal("mismatched key accepted")
	}
}

// handshake connects a client that trusts only ca and returns the leaf the
// server presented.
func handshake(t *testing.T, kp *KeyPair, ca *CA, now time.Time) *x509.Certificate {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	go func() { _ = tls.Server(s, ServerTLSConfig(kp, pool)).Handshake() }()
	cl := tls.Client(c, &tls.Config{RootCAs: pool, ServerName: "localhost", MinVersion: tls.VersionTLS12, Time: func() time.Time { return now }})
	if err := cl.Handshake(); err != nil {
		t.Fatal(err)
	}
	st := cl.ConnectionState()
	if len(st.PeerCertificates) != 2 || !st.PeerCertificates[1].Equal(ca.Cert) {
		t.Fatalf("server chain has %d certificates, want the leaf and the CA (for the join pin)", len(st.PeerCertificates))
	}
	return st.PeerCertificates[0]
}
