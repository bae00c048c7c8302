package pki

import (
	"crypto/x509"
	"encoding/pem"
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

func TestServerTLSConfig(t *testing.T) {
	p := PathsIn(t.TempDir())
	if err := Ensure(p, []string{"localhost"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerTLSConfig(p.ServerCert, p.ServerKey); err != nil {
		t.Fatal(err)
	}
	if _, err := ServerTLSConfig(p.ServerCert, p.CAKey); err == nil {
		t.Fatal("mismatched key accepted")
	}
}
